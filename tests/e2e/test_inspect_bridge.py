"""examples/inspect_task (an inspect_ai task on inspect's mock model) through
``pytest --capevolve-run`` over two xdist workers with eight rollouts in flight in each (which the
bridge runs as batched inspect evals): the gate accepts the terse prompt, and every rollout is
measured. That a batch gives the records one eval per rollout gives is
tests/unit/test_inspect_bridge.py's (real inspect, both ways); that a session's records are the
same in process and over xdist is tests/e2e/test_run_e2e.py's and test_gate_e2e.py's.

The session runs in a child process: inspect keeps process-wide state (one eval at a time,
its display) and leaves anyio streams for the garbage collector, none of which should reach
this test process."""

from __future__ import annotations

import importlib.util
import json

import pytest

# asked without importing it: the session runs in a child process, and every xdist worker collects this file
if importlib.util.find_spec("inspect_ai") is None:
    pytest.skip("needs the `inspect` extra (the compat venvs install only the core)", allow_module_level=True)

# every sandbox child imports inspect_ai (seconds): one session, the batched mode over xdist
BATCHED_OVER_XDIST = ["-n", "2", "--capevolve-concurrency", "8"]


def test_an_inspect_task_gates_a_prompt_batched_over_xdist(
    example, capevolve, projects, monkeypatch, tmp_path
):
    temp = tmp_path / "tmp"  # the session's temporary folders, where inspect writes its logs
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    project = example("inspect_task")
    # no null controls: byte-identical copies of the seed would only start two more sandbox
    # children a process, each importing inspect_ai, and add no path through the bridge
    none = ["--capevolve-null", "0", "--capevolve-commit", "none"]
    result = capevolve(project, "terse", gate=True, extra=[*BATCHED_OVER_XDIST, *none], subprocess=True)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["terse *ACCEPT*8*"])
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "terse.json").read_text())
    assert verdict["decision"] == "accept" and verdict["delta_mean"] > 0
    # every process cleaned up after inspect, sandbox children included
    assert not list(temp.glob("capevolve-inspect-*"))
    records = projects.rollout_records(project)
    # seed and terse, 8 val tasks, 2 trials each; every rollout measured (no infra error)
    assert {tag for _, _, tag, _ in records} == {"seed", "terse"}
    assert len(records) == 2 * 8 * 2 and all(r["infra_error"] is None for r in records.values())
    assert all(r["output"] for r in records.values()) and any(r["reward"] == 0 for r in records.values())
