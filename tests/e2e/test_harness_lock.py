"""Issue 24, attack 3: the harness is locked with the run. An optimizer with a shell edits the
project's own scorer (or plants a conftest.py) after the baseline, then gates a no-op: the
session refuses in one line before anything is planned or paid; a new run measures the new
harness; the candidate's own files are the tamper guard's business, not the harness."""

from __future__ import annotations

import json

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.log.event_kinds import HARNESS_LOCKED


def _events(run_dir):
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _one_trial(example, projects):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    return project


def _refused(result, *named: str) -> None:
    err = result.stderr.str()
    assert result.ret == 4, result.stdout.str()[-2000:]
    lines = [line for line in err.splitlines() if "the harness changed since run" in line]
    assert len(lines) == 1, err
    for name in named:
        assert name in lines[0], lines[0]
    assert "--capevolve-new-run" in lines[0]


@pytest.mark.attack(
    "harness",
    attack=(
        "the project's `adapter.py` (or a module it imports, two levels down) edited after the "
        "baseline; a `conftest.py` planted"
    ),
    outcome="refused: the harness is locked with the run",
)
def test_a_scorer_edited_or_a_conftest_planted_after_the_baseline_is_refused(
    one_trial_baseline, projects, capevolve
):
    project = one_trial_baseline  # a copy of one build per process
    run_dir = projects.run_dir(project)
    locks = [e for e in _events(run_dir) if e["kind"] == HARNESS_LOCKED]
    assert len(locks) == 1 and "adapter.py" in locks[0]["files"] and "<tasks>" in locks[0]["files"]
    paid = len(projects.rollout_records(project))

    adapter = project / "adapter.py"
    honest = adapter.read_text()
    adapter.write_text(honest + "\n# score(): return 1.0 when ctx holds /work/\n")
    _refused(capevolve(project, "improved", gate=True), "adapter.py (changed)")
    assert len(projects.rollout_records(project)) == paid  # refused before anything was paid
    # a finalize's way on is the restore: it said "or start a new run (--capevolve-new-run)", a flag
    # finalize refuses ("does not apply to --capevolve-finalize")
    _refused(capevolve(project, finalize=True), f"restore those files to finalize run {run_dir.name}:")
    assert not (run_dir / "seal.json").exists()

    adapter.write_text(honest)
    (project / "conftest.py").write_text("def pytest_runtest_logreport(report):\n    pass\n")
    _refused(capevolve(project, "improved", gate=True), "conftest.py (added)")
    (project / "conftest.py").unlink()

    # the candidates are not the harness: a new candidate folder and its edits move nothing
    (project / "candidates" / "improved" / "notes.md").write_text("a new rule\n")
    assert capevolve(project, "improved").ret == 0
    assert len(projects.rollout_records(project)) > paid

    # a new run measures a new harness
    adapter.write_text(honest + "\n# a new scorer, measured in a run of its own\n")
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0


@pytest.mark.attack(
    "record",
    attack="a line of the log edited in the middle",
    outcome="refused by any reader of that event, and named by `verify`",
)
def test_an_edited_lock_in_the_log_is_refused(one_trial_baseline, projects, capevolve):
    project = one_trial_baseline  # a copy of one build per process
    log = projects.run_dir(project) / "events.jsonl"
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if f'"{HARNESS_LOCKED}"' in line)
    event = json.loads(lines[at])
    event["files"]["adapter.py"] = "0" * 64  # the optimizer re-locks the run to its own scorer
    lines[at] = json.dumps(event, sort_keys=True, ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")
    result = capevolve(project)
    assert result.ret == 4
    assert "does not chain to the line before (edited)" in result.stderr.str()


JUDGED = '''

import importlib.util as _importlib_util


class JudgedAdapter(NoisyAgentAdapter):
    """Scores with a judge module loaded by importlib from a file beside the adapter."""

    def score(self, task, rollout):
        spec = _importlib_util.spec_from_file_location("noisy_judge", Path(__file__).parent / "judge.py")
        judge = _importlib_util.module_from_spec(spec)
        spec.loader.exec_module(judge)
        return Score(reward=1.0 if rollout.output == judge.PASS else 0.0)
'''


@pytest.mark.attack(
    "harness",
    attack=(
        "a module the adapter loads by `importlib`/`runpy`/`exec`, a data or config file it reads "
        "(`harness_files`), the pytest configuration, `PYTEST_ADDOPTS`/`PYTEST_PLUGINS` changed after "
        "the run began"
    ),
    outcome="refused: locked with the harness",
)
def test_what_else_changes_a_harness_is_refused_in_one_line(example, projects, capevolve, monkeypatch):
    """A module loaded by importlib, a data file, a config file named in harness_files, a
    pytest config that loads plugins, PYTEST_ADDOPTS: each changed after the baseline is
    refused before anything is paid; a log the adapter writes moves nothing."""
    project = _one_trial(example, projects)
    projects.add_adapter(project, JUDGED, "adapter.py:JudgedAdapter")
    with (project / "capevolve.yaml").open("a") as handle:
        handle.write("harness_files: [default, model.yaml]\n")
    (project / "judge.py").write_text('PASS = "resolved"\n')
    (project / "data").mkdir()
    (project / "data" / "prices.json").write_text('{"per_call": 0.002}\n')
    (project / "model.yaml").write_text("model: stand-in\n")
    assert capevolve(project).ret == 0
    paid = len(projects.rollout_records(project))

    for path, edit, named in [
        (
            project / "judge.py",
            'PASS = "escalated"  # now everything the agent fails passes\n',
            "judge.py (changed)",
        ),
        (project / "data" / "prices.json", '{"per_call": 0}\n', "data/prices.json (changed)"),
        (project / "model.yaml", "model: a stronger judge\n", "model.yaml (changed)"),
    ]:
        honest = path.read_text()
        path.write_text(edit)
        _refused(capevolve(project, "improved", gate=True), named)
        path.write_text(honest)

    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
    _refused(capevolve(project, "improved", gate=True), "<pytest config> (added)")
    (project / "pytest.ini").unlink()

    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider")
    _refused(capevolve(project, "improved", gate=True), "<env PYTEST_ADDOPTS> (added)")
    monkeypatch.delenv("PYTEST_ADDOPTS")
    assert len(projects.rollout_records(project)) == paid  # nothing was paid while refused

    (project / "calls.log").write_text("a log the adapter writes beside itself\n")
    assert capevolve(project).ret == 0  # the harness as it was: the session goes on


def test_check_says_what_the_next_session_refuses_without_writing(
    one_trial_baseline, projects, capevolve, capsys
):
    # a new user edited a microcase (then the seed's prompt) after the baseline: `capevolve check`
    # said every line ok, and the next session refused with exit 4
    project = one_trial_baseline  # a copy of one build per process
    run_dir = projects.run_dir(project)
    case = project / "microcases" / "policy-text.yaml"
    honest = case.read_text()
    case.write_text(honest + "# a note\n")
    assert _checked(project, run_dir) == 1  # and wrote nothing in the run dir
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL  ")]
    assert len(said) == 1 and "the harness changed since run" in said[0], said
    assert "microcases/policy-text.yaml (changed)" in said[0] and "--capevolve-new-run" in said[0]
    _refused(capevolve(project), "microcases/policy-text.yaml (changed)")

    case.write_text(honest)
    prompt = project / "capability" / "prompt.md"
    prompt.write_text(prompt.read_text() + "\nA new rule.\n")
    assert _checked(project, run_dir) == 1
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL  ")]
    assert len(said) == 1 and "the seed was evaluated in run" in said[0], said
    assert "different bytes" in said[0] and "--capevolve-new-run" in said[0]
    refused = capevolve(project)
    assert refused.ret == 4 and "the seed was evaluated in run" in refused.stderr.str()
    prompt.write_text(prompt.read_text().replace("\nA new rule.\n", ""))
    assert _checked(project, run_dir) == 0  # restored: the way on works


def _checked(project, run_dir) -> int:
    """``capevolve check PROJECT``'s exit code, asserting it left every file of the run dir as it was."""
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    code = main(["check", str(project)])
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
    return code


def test_baseline_refused_on_a_changed_harness_names_a_way_on_that_works(
    one_trial_baseline, capevolve, capsys
):
    """`capevolve baseline` after an edit of the harness (the tutorial's "make the adapter yours")
    refused with check's `--capevolve-new-run`, which `capevolve baseline` does not take. Its
    refusal names the session that starts the new run; pasted, it works, and so does baseline."""
    import shlex

    project = one_trial_baseline
    case = project / "microcases" / "policy-text.yaml"
    case.write_text(case.read_text() + "# a note\n")
    assert main(["baseline", str(project)]) == 2
    refusal = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(refusal) == 1 and "fix it before a baseline" in refusal[0], refusal
    new_run = shlex.split(refusal[0].split("`")[1])
    assert new_run[:3] == ["pytest", "--capevolve-run", str(project)] and "--capevolve-new-run" in new_run
    assert capevolve.pytester.runpytest(*new_run[1:], "-p", "no:cacheprovider").ret == 0
    assert main(["baseline", str(project)]) == 0  # then the same command again
    assert len(list((project / ".capevolve" / "runs").iterdir())) == 2
