"""--no-regression to the design's meaning, and stop_condition guards enforced (issue 26,
item 4): a candidate that fixes 8 val tasks but lets every addition task the seed passed 5/5
fall to 4/5 is accepted by the noise rule (a drop of 0.2 is within twice its noise); the strict
rule rejects it, and a guard "never break task X" on one of those tasks rejects it without any
flag. Each verdict records the tasks and numbers it was decided on."""

from __future__ import annotations

import json

import pytest

HURRIED = '''

class HurriedAdapter(ToyCalcAdapter):
    """A prompt that says "hurry" fails an addition on one trial seed in five."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        hurried = "hurry" in (Path(ctx) / "prompt.md").read_text().lower()
        if hurried and "+" in task.input and seed % 5 == 0:
            rollout.output = -1
        return rollout
'''


def _project(example, projects, extra_spec: str = ""):
    project = example("toy_calc")
    projects.add_adapter(project, HURRIED, "adapter.py:HurriedAdapter")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 5" + extra_spec)
    fast = project / "candidates" / "fast"
    fast.mkdir()
    prompt = (project / "capability" / "prompt.md").read_text()
    (fast / "prompt.md").write_text(prompt + "Multiply carefully. Mind the sign. Hurry.\n")
    return project


def _additions(project, projects) -> list[str]:
    """The val addition tasks: those the seed passes 5/5 and the candidate 4/5."""
    records = projects.rollout_records(project)
    return sorted({t for (split, t, tag, _), r in records.items() if tag == "seed" and "+" in r["input"]})


def test_strict_no_regression_rejects_what_the_noise_rule_lets_through(example, projects, capevolve) -> None:
    project = _project(example, projects)
    noise = capevolve(
        project,
        "fast",
        gate=True,
        extra=["--capevolve-null", "0", "--capevolve-veto-regressions", "--capevolve-commit", "none"],
    )
    run = projects.run_dir(project)
    lenient = json.loads((run / "verdicts" / "fast.json").read_text())
    assert noise.ret == 0 and lenient["decision"] == "accept" and lenient["regressions"] == []
    # the same bytes under the strict rule: a new run, since a tag's first verdict stands (and
    # nothing was booked on it, so the new run may decide it)
    strict = capevolve(
        project,
        "fast",
        gate=True,
        extra=[
            "--capevolve-null",
            "0",
            "--capevolve-veto-regressions",
            "--capevolve-regression-rule",
            "strict",
            "--capevolve-new-run",
        ],
    )
    run = projects.run_dir(project)
    verdict = json.loads((run / "verdicts" / "fast.json").read_text())
    added = _additions(project, projects)
    assert len(added) >= 3
    assert strict.ret == 10 and verdict["decision"] == "reject", verdict["reason"]
    assert verdict["basis"] == "regression_veto" and verdict["regression_rule"] == "strict"
    assert [r["task_id"] for r in verdict["regressions"]] == added
    assert all(
        (r["best"], r["candidate"], r["drop_exact"]) == (1.0, 0.8, "1/5") for r in verdict["regressions"]
    )
    assert "strict" in verdict["reason"] and f"{added[0]} 1.00→0.80" in verdict["reason"]


@pytest.mark.attack(
    "inputs",
    attack=(
        'a candidate that trades a task the stop condition guards ("never break task X") for gains elsewhere'
    ),
    outcome="rejected, basis `guard`, the task and both means in the verdict",
)
def test_a_stop_condition_guard_vetoes_an_accept_that_lowers_its_task(example, projects, capevolve) -> None:
    project = _project(example, projects)
    assert capevolve(project).ret == 0
    guarded = _additions(project, projects)[0]
    projects.edit_spec(project, "num_trials: 5", f"num_trials: 5\nstop_condition: never break task {guarded}")
    gated = capevolve(project, "fast", gate=True, extra=["--capevolve-null", "0", "--capevolve-new-run"])
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "fast.json").read_text())
    assert gated.ret == 10 and verdict["basis"] == "guard", verdict["reason"]
    assert verdict["guards"] == [
        {
            "task_id": guarded,
            "best": 1.0,
            "candidate": 0.8,
            "drop": 0.2,
            "drop_exact": "1/5",
            "noise": None,
            "held": False,
        }
    ]
    assert f"lowers {guarded} 1.00→0.80" in verdict["reason"]


def test_a_guard_naming_no_val_task_is_refused_before_paying(example, projects, capevolve) -> None:
    """The loop's red team: "never break task N76" guarded nothing (the id is ``n76``), and an
    accept lowered n76. A guard that names no val task is refused, with the id it may mean."""
    project = _project(example, projects)
    assert capevolve(project).ret == 0
    guarded = _additions(project, projects)[0]
    projects.edit_spec(
        project, "num_trials: 5", f"num_trials: 5\nstop_condition: never break task {guarded.upper()}"
    )
    gated = capevolve(project, "fast", gate=True, extra=["--capevolve-null", "0", "--capevolve-new-run"])
    assert gated.ret == 4, gated.stdout.str()[-1500:]
    out = gated.stderr.str() + gated.stdout.str()
    assert (
        f"guards task {guarded.upper()!r}, which is no val task" in out and f"did you mean {guarded!r}" in out
    )
    assert not (projects.run_dir(project) / "verdicts" / "fast.json").exists()
