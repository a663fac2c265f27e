"""examples/inspect_task (an inspect_ai task on inspect's mock model) through
``pytest --capevolve-run``: in process one rollout at a time, and over two xdist workers with
eight rollouts in flight in each (which the bridge runs as batched inspect evals). The gate
accepts the terse prompt both times, and the persisted rollouts are the same records.

Each session runs in a child process: inspect keeps process-wide state (one eval at a time,
its display) and leaves anyio streams for the garbage collector, none of which should reach
this test process."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="needs the `inspect` extra (the compat venvs install only the core)")

# every sandbox child imports inspect_ai (seconds): the batched mode rides on the xdist one
MODES = {
    "in-process": [],
    "xdist-2-concurrency-8": ["-n", "2", "--capevolve-concurrency", "8"],
}


def test_an_inspect_task_gates_a_prompt_with_the_same_records_in_every_mode(
    example, capevolve, projects, monkeypatch, tmp_path
):
    temp = tmp_path / "tmp"  # the sessions' temporary folders, where inspect writes its logs
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    records = {}
    for mode, extra in MODES.items():
        project = example("inspect_task", dest=mode)
        # no null controls: byte-identical copies of the seed would only start two more sandbox
        # children a process, each importing inspect_ai, and add no path through the bridge
        none = ["--capevolve-null", "0", "--capevolve-commit", "none"]
        result = capevolve(project, "terse", gate=True, extra=[*extra, *none], subprocess=True)
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["terse *ACCEPT*8*"])
        verdict = json.loads((projects.run_dir(project) / "verdicts" / "terse.json").read_text())
        assert verdict["decision"] == "accept" and verdict["delta_mean"] > 0
        records[mode] = projects.rollout_records(project)
    # every process cleaned up after inspect, sandbox children included
    assert not list(temp.glob("capevolve-inspect-*"))
    first = records["in-process"]
    # seed and terse, 8 val tasks, 2 trials each; every rollout measured (no infra error)
    assert {tag for _, _, tag, _ in first} == {"seed", "terse"}
    assert len(first) == 2 * 8 * 2 and all(r["infra_error"] is None for r in first.values())
    assert all(r["output"] for r in first.values()) and any(r["reward"] == 0 for r in first.values())
    for mode, found in records.items():
        assert found == first, mode
