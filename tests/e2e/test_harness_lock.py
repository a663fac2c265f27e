"""Issue 24, attack 3: the harness is locked with the run. An optimizer with a shell edits the
project's own scorer (or plants a conftest.py) after the baseline, then gates a no-op: the
session refuses in one line before anything is planned or paid; a new run measures the new
harness; the candidate's own files are the tamper guard's business, not the harness."""

from __future__ import annotations

import json

from pytest_capevolve._store.harness_lock import HARNESS_EVENT


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


def test_a_scorer_edited_or_a_conftest_planted_after_the_baseline_is_refused(example, projects, capevolve):
    project = _one_trial(example, projects)
    assert capevolve(project).ret == 0
    run_dir = projects.run_dir(project)
    locks = [e for e in _events(run_dir) if e["kind"] == HARNESS_EVENT]
    assert len(locks) == 1 and "adapter.py" in locks[0]["files"] and "<tasks>" in locks[0]["files"]
    paid = len(projects.rollout_records(project))

    adapter = project / "adapter.py"
    honest = adapter.read_text()
    adapter.write_text(honest + "\n# score(): return 1.0 when ctx holds /work/\n")
    _refused(capevolve(project, "improved", gate=True), "adapter.py (changed)")
    assert len(projects.rollout_records(project)) == paid  # refused before anything was paid

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


def test_an_edited_lock_in_the_log_is_refused(example, projects, capevolve):
    project = _one_trial(example, projects)
    assert capevolve(project).ret == 0
    log = projects.run_dir(project) / "events.jsonl"
    lines = log.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if f'"{HARNESS_EVENT}"' in line)
    event = json.loads(lines[at])
    event["files"]["adapter.py"] = "0" * 64  # the optimizer re-locks the run to its own scorer
    lines[at] = json.dumps(event, sort_keys=True, ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")
    result = capevolve(project)
    assert result.ret == 4
    assert "does not chain to the line before (edited)" in result.stderr.str()
