"""The project's memory knows tasks by content as well as by id (issue 25, red-team pass on the
project memory): a val that overlaps the one refuted bytes were decided on, renamed task ids
and a val/test swap between runs each re-decided refuted bytes or re-scored the sealed test
split as held out, before. Memory lives in the project (issue 37, item 7): a copy of it in
another folder decides afresh, unless both name a shared ledger — then the ledger's decisions
and scorings count, labelled.

The project: toy_calc's 24 tasks (12 val, 6 test, 6 train) with an agent that solves exactly
the tasks whose *input* its prompt lists (``fix 3 + 7``), so renaming the ids leaves every
candidate's effect as it was; ``helpful`` fixes 5 val tasks (p = 1/32), rejected in a
3-sibling Holm round at α/3 = 1/60 and accepted alone at 0.05.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_calls import run
from fix_list_project import split_ids
from run_log import rollout_files

from pytest_capevolve._store.memory.project_seal import REUSED_LABEL

FIX_INPUTS = """

class FixInputs(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        listed = (Path(ctx) / "prompt.md").read_text().splitlines()
        return Rollout(task_id=task.id, output=task.target if f"fix {task.input}" in listed else None)
"""
HOLM = "rejected (α = 0.01667, Holm over 3 siblings)"


def _input(task_id: str) -> str:
    """toy_calc's task input for an id ``q07`` (its adapter's formula)."""
    i = int(task_id[1:])
    return f"{3 + i} {'+*-'[i % 3]} {7 + 2 * i}"


def _fixing(project: Path, name: str, tasks: Sequence[str]) -> Path:
    target = project / "candidates" / name
    target.mkdir(parents=True, exist_ok=True)
    seed = (project / "capability" / "prompt.md").read_text()
    (target / "prompt.md").write_text(seed + "".join(f"fix {_input(t)}\n" for t in tasks))
    return target


def _project(example, projects, dest: str = "inputs", ledger: str | None = None) -> Path:
    project = example("toy_calc", dest)
    shutil.rmtree(project / "candidates")
    projects.add_adapter(project, FIX_INPUTS, "adapter.py:FixInputs")
    with (project / "capevolve.yaml").open("a") as spec:
        spec.write("leak_guard_min_length: false\n")
        if ledger is not None:
            spec.write(f"shared_ledger: {ledger}\n")
    return project


def _round_of_three(
    example,
    projects,
    capevolve,
    dest: str = "inputs",
    *,
    also_train: bool = False,
    ledger: str | None = None,
    built=None,
):
    """(project, the first run, its splits) after the Holm round that rejected ``helpful``
    (which, ``also_train``, lists 5 train tasks too: outside that run's val, no effect there).
    Given ``built`` (tests/conftest.py's), a copy of one build per process; never with a shared
    ledger, which lives outside the project and names it."""

    def make() -> tuple[Path, dict]:
        project = _project(example, projects, dest, ledger)
        assert capevolve(project).ret == 0
        run1 = projects.run_dir(project)
        splits = json.loads((run1 / "splits.json").read_text())
        val = splits["val"]
        _fixing(project, "helpful", [*val[:5], *(splits["train"][:5] if also_train else [])])
        _fixing(project, "weak1", val[5:6])
        _fixing(project, "weak2", val[6:7])
        gated = capevolve(
            project, "helpful", "weak1", "weak2", gate=True, extra=["--capevolve-commit", "auto"]
        )
        assert gated.ret == 10, gated.stdout.str()
        verdict = json.loads((run1 / "verdicts" / "helpful.json").read_text())
        assert (verdict["decision"], verdict["p_exact"]) == ("reject", "1/32")
        return project, splits

    assert built is None or ledger is None
    project, splits = make() if built is None else built(f"task-keys-round-{dest}-{also_train}", dest, make)
    return project, projects.run_dir(project), splits


def _split_file(project: Path, name: str, **splits: Sequence[str]) -> None:
    (project / f"{name}.json").write_text(json.dumps({k: list(v) for k, v in splits.items()}))
    text = (project / "capevolve.yaml").read_text()
    kept = [line for line in text.splitlines() if not line.startswith("split_ids_file:")]
    (project / "capevolve.yaml").write_text("\n".join([*kept, f"split_ids_file: {name}.json", ""]))


def _new_gate(capevolve, project, *candidates, extra=()):
    return capevolve(
        project, *candidates, gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "auto", *extra]
    )


@pytest.mark.attack(
    "laundering",
    attack=(
        "a new run whose val differs by a task (`split_val` 0.5 → 0.55, or a `split_ids_file` = the "
        "old val + one task), gating the refuted bytes alone at 0.05"
    ),
    outcome=(
        "refused, naming the earlier run, its decision, its level and how many val tasks the two "
        "share; a val disjoint from it is a fresh look, gated and labelled with the level it is judged "
        "at"
    ),
)
def test_a_val_overlapping_the_one_refuted_bytes_were_decided_on_does_not_re_decide_them(
    example, projects, capevolve
):
    project, run1, splits = _round_of_three(example, projects, capevolve, also_train=True)
    old_val = splits["val"]
    # the red team's step: one more val task, one train task fewer
    projects.edit_spec(project, "split_val: 0.5", "split_val: 0.55")
    projects.edit_spec(project, "split_train: 0.25", "split_train: 0.2")
    again = _new_gate(capevolve, project, "helpful")
    run2 = projects.run_dir(project)
    new_val = split_ids(project, "val")
    shared = len(set(new_val) & set(old_val))
    # the attack is real: helpful's 5 tasks are in the new val, so alone at 0.05 it would pass
    assert set(old_val[:5]) <= set(new_val) and len(new_val) == 13 and 0 < shared < 13
    # today: ACCEPT at 0.05, booked as best
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            f"helpful *REJECT*never paid for*{HOLM} in run {run1.name} on a val of 12 tasks "
            f"sharing {shared} of this run's 13*"
        ]
    )
    assert not list(run2.glob("rollouts/val/*"))  # nothing paid

    # the same through a split_ids_file: the old val and one more task
    projects.edit_spec(project, "split_val: 0.55", "split_val: 0.5")
    projects.edit_spec(project, "split_train: 0.2", "split_train: 0.25")
    extra = splits["train"][-1]
    _split_file(project, "plus_one", train=splits["train"][:-1], val=[*old_val, extra], test=splits["test"])
    plus_one = _new_gate(capevolve, project, "helpful")
    assert plus_one.ret == 10, plus_one.stdout.str()
    plus_one.stdout.fnmatch_lines(
        [f"helpful *REJECT*{HOLM} in run {run1.name} on a val of 12 tasks sharing 12 of this run's 13*"]
    )

    # a val disjoint from it is a fresh look: gated, and the verdict says so and at which level
    _split_file(project, "fresh", train=[], val=[*splits["train"], *splits["test"]], test=[])
    fresh = _new_gate(capevolve, project, "helpful")
    assert fresh.ret == 0, fresh.stdout.str()
    fresh.stdout.fnmatch_lines(
        [
            "*a fresh look on a val disjoint from the one these bytes were decided on: run "
            f"{run1.name} booked reject (α = 0.01667, Holm over 3 siblings) on these bytes as "
            "'helpful'; judged here at α = 0.05*"
        ]
    )
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "helpful.json").read_text())
    assert verdict["decision"] == "accept" and verdict["details"]["fresh_val"]["earlier_run"] == run1.name


def _refused_finalize(capevolve, project, *parts: str):
    again = capevolve(project, finalize=True)
    assert again.ret == 4, again.stdout.str()
    again.stderr.fnmatch_lines(["ERROR: TestSealError: " + "*".join(parts) + "*--capevolve-test-reused*"])
    return again


@pytest.mark.attack(
    "laundering",
    attack=(
        "every task id renamed in `adapter.py` (`t07` → `T07`), then a new run gating the refuted "
        "bytes and finalizing the same test tasks"
    ),
    outcome="refused: tasks are matched by content (a digest of input, target and metadata) as well as id",
)
def test_renamed_task_ids_neither_re_decide_refuted_bytes_nor_re_score_the_sealed_test(
    built, example, projects, capevolve, capsys
):
    project, run1, splits = _round_of_three(example, projects, capevolve, built=built)
    assert capevolve(project, finalize=True).ret == 0
    adapter = project / "adapter.py"
    # the red team's step: every id renamed, every task's content as it was
    adapter.write_text(adapter.read_text().replace('id=f"q{i:02d}"', 'id=f"Q{i:02d}"'))
    again = _new_gate(capevolve, project, "helpful")
    # today: ACCEPT at 0.05 (the val's ids were new to the project)
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines([f"helpful *REJECT*never paid for*{HOLM} in run {run1.name}*"])
    run2 = projects.run_dir(project)
    renamed = [t.upper() for t in splits["test"]]
    assert json.loads((run2 / "splits.json").read_text())["test"] == renamed
    # today: the same 6 test tasks scored again and called held out
    _refused_finalize(
        capevolve,
        project,
        f"run {run2.name}: its test split overlaps test tasks the project already scored "
        f"(run {run1.name}: 6 task(s) {', '.join(renamed)})",
    )
    assert not list((run2 / "rollouts" / "test").glob("*.json"))  # nothing paid
    code, out, _ = run(capsys, "runs", str(project), "--json")
    # capevolve runs says so before a finalize: the renamed tasks are run 1's, by content
    assert code == 0 and [row["test"] for row in json.loads(out)] == ["scored", "scored elsewhere"]
    assert json.loads(out)[1]["test_scored_by"] == [run1.name]


@pytest.mark.attack(
    "laundering",
    attack=(
        "a `split_ids_file` swapping val and test between runs (the sealed test tasks as val, the "
        "decided val as test)"
    ),
    outcome=(
        "refused: a val/train holding sealed test tasks before anything is paid; a test split holding "
        "a val earlier decisions were taken on at finalize; `--capevolve-test-reused` scores it "
        'labelled "test reused"'
    ),
)
def test_a_val_and_test_swapped_between_runs_is_refused_not_reported_held_out(
    built, example, projects, capevolve, capsys
):
    project, run1, splits = _round_of_three(example, projects, capevolve, built=built)
    assert capevolve(project, finalize=True).ret == 0
    old_val, old_test, old_train = splits["val"], splits["test"], splits["train"]
    # a val holding the sealed test tasks: refused before anything is paid or any run is left
    _split_file(project, "swap", train=old_train[3:], val=[*old_test, *old_train[:3]], test=old_val)
    spaced = _fixing(project, "helpful-space", old_val[:5]) / "prompt.md"
    spaced.write_text(spaced.read_text() + " ")  # new bytes, the same effect
    swapped = _new_gate(capevolve, project, "helpful-space")
    # today: the gate paid rollouts on the sealed test tasks, accepted, and finalize called it held out
    assert swapped.ret == 4, swapped.stdout.str()
    swapped.stderr.fnmatch_lines(
        [
            "ERROR: TestSealError: the new run (not kept): its val/train splits hold test tasks the project already "
            f"scored (run {run1.name}: 6 task(s) {', '.join(sorted(old_test))})*the test split is sealed "
            "for the project*--capevolve-test-reused*"
        ]
    )
    assert [p.name for p in (project / ".capevolve" / "runs").iterdir()] == [run1.name]

    # a test split drawn from the val the first run's decisions were taken on
    _split_file(project, "swap", train=[], val=old_train, test=old_val)
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    run2 = projects.run_dir(project)
    _refused_finalize(
        capevolve,
        project,
        f"run {run2.name}: its test split holds val tasks the project's decisions were taken on "
        f"(run {run1.name} (its val: decisions were taken on them): 12 task(s)",
    )
    assert not list((run2 / "rollouts" / "test").glob("*.json"))
    scored = capevolve(project, finalize=True, extra=["--capevolve-test-reused"])
    assert scored.ret == 0, scored.stdout.str()
    scored.stdout.fnmatch_lines(
        [f"*{REUSED_LABEL}: these test tasks were scored before (run {run1.name} (its val*"]
    )
    code, out, _ = run(capsys, "runs", str(project), "--json")
    assert code == 0 and [row["test"] for row in json.loads(out)] == ["scored", "scored (reused)"]


def _copy(project: Path, dest: Path) -> Path:
    """The project copied to another folder without its ``.capevolve``, as a second clone has it."""
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns(".capevolve", "__pycache__"))
    return dest


def _paid(project: Path, tag: str, projects) -> list[Path]:
    return rollout_files(projects.run_dir(project), tag)


@pytest.mark.attack(
    "laundering",
    attack=(
        "the project copied to another folder without `.capevolve` (or cloned again), then refuted "
        "bytes gated and the sealed test tasks scored there"
    ),
    outcome=(
        "**another project, by design**: memory lives in the project, so a copy or a second clone "
        "decides and scores afresh (as an honest user's copy must: before, a machine-wide memory made "
        "the README's own commands fail). Projects that must hold each other's decisions name one "
        "`shared_ledger` in their specs: then refused, labelled with the project and the ledger, "
        "matched by task content; an unrelated project with the same ids is not held"
    ),
)
def test_two_projects_in_two_folders_sharing_task_ids_decide_independently(
    built, example, projects, capevolve, pytester
):
    project, run1, splits = _round_of_three(example, projects, capevolve, built=built)
    assert capevolve(project, finalize=True).ret == 0
    # the same project in another folder (a copy, a second clone): the same ids, the same tasks
    copy = _copy(project, pytester.path / "copied")
    assert capevolve(copy).ret == 0
    assert split_ids(copy, "val") == splits["val"]
    alone = capevolve(copy, "helpful", gate=True, extra=["--capevolve-commit", "auto"])
    # before: REJECT, never paid for, from the first project's decision kept outside both
    assert alone.ret == 0, alone.stdout.str()
    alone.stdout.fnmatch_lines(["helpful *ACCEPT*"])
    assert "never paid for" not in alone.stdout.str() and _paid(copy, "helpful", projects)
    assert not (copy / "capevolve.memory.json").exists()
    # its test split is its own to score once, however often the first project scored the same tasks
    scored = capevolve(copy, finalize=True)
    assert scored.ret == 0, scored.stdout.str()
    assert REUSED_LABEL not in scored.stdout.str()
    # and nothing of the copy reached the first project: its own memory still decides there
    again = _new_gate(capevolve, project, "helpful")
    assert again.ret == 10, again.stdout.str()
    again.stdout.fnmatch_lines([f"helpful *REJECT*never paid for*{HOLM} in run {run1.name}:*"])


@pytest.mark.attack(
    "laundering",
    attack=(
        "the project copied to another folder without `.capevolve` (or cloned again), then refuted "
        "bytes gated and the sealed test tasks scored there"
    ),
)
def test_a_shared_ledger_named_by_two_projects_holds_each_others_decisions_labelled(
    example, projects, capevolve, pytester
):
    ledger = pytester.path / "team-ledger.jsonl"
    project, run1, splits = _round_of_three(example, projects, capevolve, ledger="../team-ledger.jsonl")
    assert capevolve(project, finalize=True).ret == 0
    copy = _copy(project, pytester.path / "copied")
    gated = _new_gate(capevolve, copy, "helpful")
    # the ledger's decision counts, and says whose it is and where it was read
    where = f"run {run1.name} (of the project at {project.resolve()}, from the shared ledger {ledger})"
    assert gated.ret == 10, gated.stdout.str()
    gated.stdout.fnmatch_lines([f"helpful *REJECT*never paid for*{HOLM} in {where}:*"])
    assert not _paid(copy, "helpful", projects)
    run2 = projects.run_dir(copy)
    verdict = json.loads((run2 / "verdicts" / "helpful.json").read_text())
    assert verdict["details"]["shared_ledger"] == {"project": str(project.resolve()), "ledger": str(ledger)}
    (decision,) = [e for e in _events(run2) if e["kind"] == "decision" and e["tag"] == "helpful"]
    assert decision["shared_ledger"]["project"] == str(project.resolve())
    assert "shared ledger: the project at" in (run2 / "LEDGER.md").read_text()
    _refused_finalize(
        capevolve,
        copy,
        f"run {run2.name}: its test split overlaps test tasks the project already scored "
        f"(run {run1.name} (of the project at {project.resolve()}, from the shared ledger {ledger}): 6 task(s)",
    )

    # an unrelated project with the same ids (other tasks) naming the same ledger is not held by it
    other = _project(example, projects, "unrelated")
    adapter = other / "adapter.py"
    adapter.write_text(adapter.read_text().replace("a, b = 3 + i, 7 + 2 * i", "a, b = 5 + i, 11 + 2 * i"))
    shutil.copytree(project / "candidates" / "helpful", other / "candidates" / "helpful")
    assert capevolve(other).ret == 0
    assert split_ids(other, "val") == splits["val"]  # the same ids, in the same splits
    # the ledger is frozen with the run: named mid-run, it is a new run
    with (other / "capevolve.yaml").open("a") as spec:
        spec.write(f"shared_ledger: {ledger}\n")
    moved = capevolve(other, "helpful", gate=True)
    assert moved.ret == 4 and "shared_ledger changed since run" in moved.stderr.str(), moved.stderr.str()
    gated = _new_gate(capevolve, other, "helpful")
    assert "never paid for" not in gated.stdout.str(), gated.stdout.str()
    assert _paid(other, "helpful", projects)
    assert capevolve(other, finalize=True).ret == 0


def _events(rundir: Path) -> list[dict]:
    return [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
