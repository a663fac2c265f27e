"""`capevolve hill-climb`: the optimize loop end to end on the bundled examples, its resume after
a kill -9, its optimizer timeout, and the pure parts (focus schedules, the plateau signal, the
prompt)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_calls import hill_climb

from pytest_capevolve._loop.prompt import (
    PromptInputs,
    convergence,
    focus_tasks,
    render_prompt,
)


def test_flags_the_spec_overrides_are_refused_not_ignored(example, capsys):
    project = example("toy_calc")
    code, _, err = hill_climb(capsys, project, "--optimizer", "x {workdir}", "--n-trials", "3")
    assert code == 2 and "sets num_trials: 1" in err and "edit the spec" in err
    code, _, err = hill_climb(capsys, project, "--optimizer", "x {prompt}")
    assert code == 2 and "never names {workdir}" in err
    assert not (project / ".capevolve").exists()  # refused before anything ran


def test_the_noisy_agents_optimizer_takes_the_tutorials_command(tmp_path):
    """A newcomer's trap: the hill-climb tutorial's `python optimizer.py {workdir}` on a copy of
    examples/noisy_agent died with an IndexError (no {prompt}) every iteration, each booked a repeat."""
    optimizer = Path(__file__).resolve().parents[2] / "examples" / "noisy_agent" / "optimizer.py"
    workdir = tmp_path / "cand_0002"  # the iteration that adds the fare-class rule
    workdir.mkdir()
    (workdir / "LEDGER.md").write_text("")
    (workdir / "prompt.md").write_text("seed\n")
    ran = subprocess.run([sys.executable, optimizer, workdir], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "RULE:check-fare-class" in (workdir / "prompt.md").read_text()


# -- pure parts --------------------------------------------------------------------------------------

PARENT = [
    {"task_id": "a", "band": "solid", "passes": 3, "trials": 3, "mean_reward": 1.0, "infra_errors": 0},
    {"task_id": "b", "band": "unstable", "passes": 2, "trials": 3, "mean_reward": 0.67, "infra_errors": 0},
    {"task_id": "c", "band": "defect", "passes": 0, "trials": 3, "mean_reward": 0.0, "infra_errors": 0},
    {"task_id": "d", "band": "unstable", "passes": 1, "trials": 3, "mean_reward": 0.33, "infra_errors": 0},
    {"task_id": "e", "band": "missing", "passes": 0, "trials": 0, "mean_reward": None, "infra_errors": 3},
    {"task_id": "f", "band": "defect", "passes": 0, "trials": 3, "mean_reward": 0.0, "infra_errors": 0},
]


def test_focus_schedules_on_a_fixed_parent():
    schedule = {
        mode: [focus_tasks(PARENT, mode, i) for i in range(1, 7)]
        for mode in ("all", "cyclic", "hardest-first")
    }
    assert schedule["all"] == [["b", "c", "d", "f"]] * 6
    assert schedule["cyclic"] == [["b"], ["c"], ["d"], ["f"], ["b"], ["c"]]
    assert schedule["hardest-first"] == [["c"], ["f"], ["d"], ["b"], ["c"], ["f"]]
    solid = [r for r in PARENT if r["band"] == "solid"]
    assert all(focus_tasks(solid, mode, 1) == [] for mode in ("all", "cyclic", "hardest-first"))
    with pytest.raises(ValueError, match="focus 'random'"):
        focus_tasks(PARENT, "random", 1)


def test_the_convergence_signal_escalates_with_the_stall():
    assert [convergence(s) for s in range(8)] == [
        "ok",
        "ok",
        "warn",
        "paradigm_shift",
        "paradigm_shift",
        "stop",
        "stop",
        "stop",
    ]


def test_the_prompt_splits_failures_protects_passing_ids_and_names_the_edit_surface():
    inputs = PromptInputs(
        iteration=3,
        cid="cand_0003",
        parent="cand_0001",
        workdir="/w",
        rows=PARENT,
        examples={"c": {"feedback": "wrong | answer", "rollout": "rollouts/val/c__cand_0001__t0.json"}},
        focus_mode="cyclic",
        focus=["d"],
        stall=3,
    )
    text = render_prompt(inputs)
    assert "### Always failing (0/n): 2" in text and "### Flaky (0 < k < n): 2" in text
    assert "### Infra-errored (missing data, not failures): 1" in text
    assert "| c | 0/3 | wrong \\| answer | rollouts/val/c__cand_0001__t0.json |" in text
    assert "Fix these val tasks first: d" in text and "Plateau signal: paradigm_shift (stall 3)" in text
    assert text.rstrip().endswith("- a") and "No edit surface was named (--capabilities)" in text
    narrowed = render_prompt(PromptInputs(**{**inputs.__dict__, "capabilities": ("prompt.md", "skills/")}))
    assert "You may edit only: `prompt.md`, `skills/`" in narrowed and "No edit surface" not in narrowed
    assert render_prompt(inputs, "custom $cid for $parent") == "custom cand_0003 for cand_0001"
