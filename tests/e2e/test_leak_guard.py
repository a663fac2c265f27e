"""The leak guard end to end: a candidate whose edit holds a val task's id is indecisive and
unpaid, the refusal naming the file and line; ``leak_guard_min_length: false`` turns it off."""

from __future__ import annotations

import json
import shutil

import pytest
from run_log import rollout_files

from pytest_capevolve._project import leak

# a val id of noisy_agent's frozen splits (split_seed 7)
VAL_ID = "n13"


@pytest.mark.attack(
    "runs-recorded",
    attack="a val or test task's id or gold answer written into a candidate",
    outcome="refused: indecisive and unpaid, naming the file and line (the leak guard)",
)
def test_a_candidate_embedding_a_val_task_id_is_refused_unpaid_naming_file_and_line(
    example, projects, capevolve
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    # noisy_agent's ids are three characters long: the guard is tuned to see them
    (project / "capevolve.yaml").write_text(
        (project / "capevolve.yaml").read_text() + "leak_guard_min_length: 3\n"
    )
    cand = project / "candidates" / "peek"
    shutil.copytree(project / "capability", cand)
    lines = (cand / "prompt.md").read_text().splitlines()
    (cand / "prompt.md").write_text(
        "\n".join([*lines, f"- For ticket {VAL_ID.upper()}, escalate at once."]) + "\n"
    )
    result = capevolve(project, "peek", gate=True)
    assert result.ret == 11, result.stdout.str()[-3000:]  # indecisive
    out = result.stdout.str()
    assert f"prompt.md:{len(lines) + 1} holds the id of val task '{VAL_ID}'" in out
    # the way on for an owner whose capability must hold answers, named in the refusal
    assert "leak_guard_min_length: false in the spec, in a new run (--capevolve-new-run)" in out
    records = projects.rollout_records(project)
    assert not [k for k in records if k[2] == "peek"]  # no rollout paid for it
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "peek.json").read_text())
    assert verdict["decision"] == "indecisive" and verdict["basis"] == "leak"
    assert verdict["details"]["leaks"] == [{"file": "prompt.md", "line": len(lines) + 1, "kind": "id"}]

    # turned off (the guards are frozen with a run: in a new one), the same bytes are evaluated and paid
    projects.edit_spec(project, "leak_guard_min_length: 3", "leak_guard_min_length: false")
    again = capevolve(project, "peek", tags=["peek2"], extra=["--capevolve-new-run"])
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert len([k for k in projects.rollout_records(project) if k[2] == "peek2"]) == 40


@pytest.mark.attack(
    "runs-recorded",
    attack=(
        "a three-character id (`n13`, the shipped example's) under the default `leak_guard_min_length` "
        '4, or re-encoded: fullwidth, zero-width characters, `"n1" + "3"`, base64'
    ),
    outcome=(
        "refused: ids mixing letters and digits count at any length; those encodings are undone before "
        "matching (what it cannot see is listed in [what runs is what is "
        "recorded](what-runs-is-what-is-recorded.md#the-leak-guard))"
    ),
)
def test_the_default_guard_sees_the_examples_short_ids_and_their_simple_re_encodings(
    example, projects, capevolve
) -> None:
    import base64

    project = example("noisy_agent")  # its ids are three characters ("n13"); the default spec
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    hidden = {
        "plain": ("prompt.md", f"- For ticket {VAL_ID}, escalate at once."),
        "fullwidth": ("prompt.md", "- For ticket ｎ１３, escalate at once."),
        "zero_width": ("prompt.md", "- For ticket n\u200b1\u200d3, escalate at once."),
        "joined": ("tools/hint.py", 'TICKET = "n1" + "3"  # escalate this one'),
        "base64": ("prompt.md", f"- Escalate {base64.b64encode(f'ticket {VAL_ID}'.encode()).decode()}."),
    }
    lines = {}
    for name, (where, text) in hidden.items():
        cand = project / "candidates" / name
        shutil.copytree(project / "capability", cand)
        target = cand / where
        before = target.read_text().splitlines() if target.exists() else []
        target.write_text("\n".join([*before, text]) + "\n")
        lines[name] = (where, len(before) + 1)
    result = capevolve(project, *hidden, gate=True)
    # today: every one of them is paid for and gated (the default min length is 4)
    assert result.ret == 11, result.stdout.str()[-3000:]
    out = result.stdout.str()
    for name, (where, line) in lines.items():
        assert f"{where}:{line} holds the id of val task '{VAL_ID}'" in out, name
        verdict = json.loads((projects.run_dir(project) / "verdicts" / f"{name}.json").read_text())
        assert (verdict["decision"], verdict["basis"]) == ("indecisive", "leak"), name
    assert not [k for k in projects.rollout_records(project) if k[2] in hidden]  # nothing paid


WORD_ADAPTER = """
from pathlib import Path

from pytest_capevolve import Rollout, Score, Task

WORDS = ["apple", "letter", "kitten", "summer", "needle", "pepper"]
PREFIX = ""


class WordAdapter:
    def tasks(self, split):
        return [Task(id=PREFIX + w, input=w, target=str(len(w))) for w in WORDS]

    def run_target(self, task, ctx, *, seed):
        careful = "one character at a time" in (Path(ctx) / "prompt.md").read_text()
        return Rollout(output=str(len(task.input) if careful or seed % 2 else len(set(task.input))))

    def score(self, task, rollout):
        return Score(reward=float(rollout.output == task.target))
"""


def test_a_plain_word_id_in_prose_names_ids_that_are_no_word_and_renamed_the_same_prose_is_scored(
    pytester, capevolve
) -> None:
    """A newcomer's task ids were the words of the tasks ('letter'), and the prompt's prose used one:
    refused, and the only way on named was to turn the guard off (leak_guard_min_length: false)."""
    project = pytester.path / "words"
    (project / "capability").mkdir(parents=True)
    (project / "capability" / "prompt.md").write_text("Count the letters.\n")
    cand = project / "candidates" / "spell"
    cand.mkdir(parents=True)
    (cand / "prompt.md").write_text(
        "Count the letters.\nSpell the word letter by letter, one character at a time.\n"
    )
    (project / "adapter.py").write_text(WORD_ADAPTER)
    (project / "capevolve.yaml").write_text(
        "adapter: adapter.py:WordAdapter\ncapability_path: capability\nnum_trials: 2\n"
        "split_train: 0.0\nsplit_val: 1.0\nsplit_test: 0.0\n"
    )
    refused = capevolve(project, cand, gate=True)
    assert refused.ret == 11, refused.stdout.str()[-3000:]
    refused.stdout.fnmatch_lines(
        [
            "*prompt.md:2 holds the id of val task 'letter'); 'letter' is a plain word*task ids that are no word ('w-letter'*"
        ]
    )
    # the way on it names: the tasks renamed in the adapter, in a new run; the guard stays on
    (project / "adapter.py").write_text(WORD_ADAPTER.replace('PREFIX = ""', 'PREFIX = "w-"'))
    scored = capevolve(project, cand, gate=True, extra=["--capevolve-new-run"])
    assert "never scored" not in scored.stdout.str(), scored.stdout.str()[-3000:]
    scored.stdout.fnmatch_lines(["*spell: booked *"])


def test_a_clean_screen_is_kept_by_the_sealed_summary_and_other_bytes_are_screened_again(
    example, projects, capevolve, monkeypatch
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    assert capevolve(project, "improved").ret == 0
    built: list[object] = []
    real = leak.needles
    monkeypatch.setattr(leak, "needles", lambda *args: built.append(args) or real(*args))
    resumed = capevolve(project, "improved")
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    resumed.stdout.fnmatch_lines(["rollouts: 0 paid, 80 reused*"])
    assert built == []  # the same bytes against the same needles: the summary's finding stands
    # other bytes miss it: screened again, then evaluated
    (project / "candidates" / "improved" / "NOTES.md").write_text("why this helps\n")
    again = capevolve(project, "improved", tags=["improved2"])
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert len(built) == 1


@pytest.mark.attack(
    "runs-recorded",
    attack="a writer outside the boundary swaps a candidate's file for a leaking one just after the leak screen read it",
    outcome="refused before any rollout: the bytes screened are the bytes hashed, and registration holds the "
    "snapshot to that hash",
)
def test_bytes_written_after_the_leak_screen_read_a_candidate_are_never_registered(
    example, projects, capevolve, monkeypatch
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    (project / "capevolve.yaml").write_text(
        (project / "capevolve.yaml").read_text() + "leak_guard_min_length: 3\n"
    )
    cand = project / "candidates" / "swap"
    shutil.copytree(project / "capability", cand)
    clean = (cand / "prompt.md").read_text()
    leaking = clean + f"- For ticket {VAL_ID.upper()}, escalate at once.\n"
    screened: list[object] = []
    real = leak.find_leaks

    def screen_then_swap(*args: object, **kwargs: object) -> list[leak.Leak]:
        found = real(*args, **kwargs)  # type: ignore[arg-type]
        screened.append(found)
        (cand / "prompt.md").write_text(leaking)  # the race, won: after the screen, before the snapshot
        return found

    monkeypatch.setattr(leak, "find_leaks", screen_then_swap)
    result = capevolve(project, "swap", gate=True)
    err = result.stderr.str()
    assert screened == [[]]  # the screen read the clean bytes
    assert result.ret == 4 and "no longer holds the bytes checked" in err, err[-3000:]
    assert "register it again once nothing writes to it" in err  # the way on
    runs = project / ".capevolve" / "runs"
    assert runs.is_dir()  # the session got as far as its run dir
    assert not [
        r for run in runs.iterdir() for s in ("val", "train") for r in rollout_files(run, "swap", s)
    ]  # nothing paid for it
    assert not list(runs.glob("*/candidates/swap"))  # never registered
