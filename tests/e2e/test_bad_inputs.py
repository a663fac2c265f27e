"""Bad input gets one clear message naming the file, the key and the fix (exit 4, usage)."""

from __future__ import annotations

import pytest
from bad_input_cases import CASES


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gives_its_message(example, projects, capevolve, case: str) -> None:
    project = example("toy_calc")
    breaker, expected = CASES[case]
    breaker(project, projects)
    result = capevolve(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(expected)
    assert "Traceback" not in result.stderr.str()
    assert not list((project / ".capevolve" / "runs").glob("*/")) if project.is_dir() else True


def test_ini_default_with_wrong_type(pytester: pytest.Pytester, example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1\n", "")
    pytester.makeini("[pytest]\ncapevolve_num_trials = many\n")
    result = capevolve(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: pytest ini key capevolve_num_trials must be a whole number ≥ 1, got 'many'"]
    )


def test_ini_default_applies(pytester: pytest.Pytester, example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1\n", "")
    pytester.makeini("[pytest]\ncapevolve_num_trials = 2\n")
    assert capevolve(project).ret == 0
    assert {k[3] for k in projects.rollout_records(project)} == {0, 1}


def test_bad_tag_is_refused(example, capevolve) -> None:
    project = example("toy_calc")
    result = capevolve(project, "careful", tags=["a__b"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tag 'a__b' is not usable*"])


NAN_SCORE = """
class NanAdapter(ToyCalcAdapter):
    def score(self, task, rollout):
        return Score(reward=float("nan") if task.id == "q00" else 2.0)
"""


def test_invalid_rewards_are_infra_errors_never_zeros(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, NAN_SCORE, "adapter.py:NanAdapter")
    result = capevolve(project)
    assert result.ret == 12
    result.stdout.fnmatch_lines(["*reward must lie in [[]0, 1], got 2.0*capevolve never clamps*"])
    records = projects.rollout_records(project)
    assert all(r["reward"] is None and r["infra_error"].startswith("invalid score") for r in records.values())
    result.stdout.fnmatch_lines(["seed *val*12*1*—*—*0%*"])


HOSTILE_IDS = """
class HostileAdapter(ToyCalcAdapter):
    def tasks(self, split):
        base = super().tasks(split)
        names = ["../../x", "/etc/passwd", "a__b", "..", "a/../../b", "\\u00e9t\\u00e9", "x" * 400]
        return [Task(id=n, input=t.input, target=t.target) for n, t in zip(names, base)] + base[len(names):]
"""


def test_hostile_task_ids_stay_inside_the_run_dir(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, HOSTILE_IDS, "adapter.py:HostileAdapter")
    projects.edit_spec(
        project,
        "split_train: 0.25\nsplit_val: 0.5\nsplit_test: 0.25",
        "split_train: 0.0\nsplit_val: 1.0\nsplit_test: 0.0",
    )
    result = capevolve(project)
    assert result.ret == 0
    rundir = sorted((project / ".capevolve/runs").iterdir())[-1]
    files = [p for p in pytester.path.rglob("*.json") if "rollouts" in p.parts]
    assert len(files) == 24
    assert all(p.parent == rundir / "rollouts" / "val" for p in files)
    assert {r["task_id"] for r in projects.rollout_records(project).values()} >= {
        "../../x",
        "/etc/passwd",
        "a__b",
        "..",
    }
