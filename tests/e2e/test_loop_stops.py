"""hill-climb stops where its ceilings say, and says why in words that mean it (issue 26):

- an optimizer whose own reported cost leaves no room for its round's gate under ``max_usd``
  stops the loop before a rollout is paid (the gate session never learned that cost, and paid
  the cap over: a red team reached 223 %);
- a stall is reported as a stall, with its rule, not as "budget exhausted";
- ``--max-iterations`` counts the run's iterations, and says so when the run already holds more.
"""

from __future__ import annotations

import json
import sys

import pytest
from cli_calls import hill_climb

PY = sys.executable

METERED = '''

class MeteredAdapter(ToyCalcAdapter):
    """A rollout costs $0.001: the runner's spend is measured, so max_usd can be checked."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.cost_usd = 0.001
        return rollout
'''

# an edit a gate would pay for, and a proposer's cost that eats what the gate needed
DEAR = r"""
import json, sys
from pathlib import Path
workdir = Path(sys.argv[1])
(workdir / "prompt.md").write_text((workdir / "prompt.md").read_text() + "Multiply carefully.\n")
print(json.dumps({"cost_usd": 0.02, "tokens": 5000}))
"""
CAP = 0.05  # the seed's 12 val rollouts cost $0.012; a gate owes 36 more (candidate + 2 nulls), $0.036


@pytest.mark.attack(
    "loop-memory",
    attack=(
        "an optimizer whose own cost uses up what its round's gate needed under `max_usd` (a red team "
        "reached 223 % of the cap)"
    ),
    outcome=(
        "prevented: the cost is logged as the proposal completes, and every ceiling check (the loop's, "
        "the gate session's plan and per-process shares) counts it; a round that no longer fits is "
        "booked `indecisive (budget)` without a rollout and the loop stops"
    ),
)
def test_a_proposer_whose_cost_leaves_no_room_for_its_gate_stops_the_loop_before_a_rollout(
    example, projects, capsys
):
    project = example("toy_calc")
    projects.add_adapter(project, METERED, "adapter.py:MeteredAdapter")
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text() + f"max_usd: {CAP}\n")
    (project / "dear.py").write_text(DEAR)
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", f"{PY} dear.py {{workdir}}", "--max-iterations", "3"
    )
    assert code == 0, err
    # the round was proposed ($0.032 spent: under the cap) but its gate ($0.036) did not fit
    assert [(r["tag"], r["decision"], r["basis"]) for r in summary["iterations"]] == [
        ("cand_0001", "indecisive", "budget")
    ]
    assert "never gated: its optimizer reported $0.0200" in err and "max_usd" in err
    assert summary["stopped"].startswith("spend: "), summary["stopped"]
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["spent"]["metric_calls"] == 12  # the seed's baseline only: no rollout of the round
    assert state["spent"]["usd"] + state["spent"]["optimizer_usd"] == pytest.approx(0.032)
    assert state["spent"]["usd"] + state["spent"]["optimizer_usd"] <= CAP
    # --max-iterations counts the run's iterations: a second invocation says what it found
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", f"{PY} dear.py {{workdir}}", "--max-iterations", "0"
    )
    assert code == 0, err
    assert summary["stopped"] == (
        "max iterations: the run already holds 1 hill-climb iterations, more than --max-iterations 0 "
        "allows (it counts the run's iterations, not this invocation's): none run"
    )


def test_a_stall_is_reported_as_a_stall_with_its_rule(example, capsys):
    project = example("toy_calc")
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text() + "stall: 1\n")
    (project / "idle.py").write_text("import sys\nprint('no edit to', sys.argv[1])\n")  # a repeat: unpaid
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", f"{PY} idle.py {{workdir}}", "--max-iterations", "3"
    )
    assert code == 0, err
    assert [(r["decision"], r["basis"]) for r in summary["iterations"]] == [("reject", "repeat")]
    assert summary["stopped"] == (
        "stall: stalled: 1 rejects in a row reached the stall rule (spec stall=1: stop after that many "
        "rejects without an accept)."
    ), summary["stopped"]
    assert "budget" not in summary["stopped"]
