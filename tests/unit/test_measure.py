"""`capevolve measure` (the honest table, report.md) and `capevolve verify` (the event chain)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.log.event_chain import verify_events
from pytest_capevolve._store.rundir import RunDir


def test_verify_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 4
    assert "not a run dir" in capsys.readouterr().err


event_fields = st.dictionaries(
    st.sampled_from(["task_id", "tag", "reward", "infra_error"]),
    st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=8), st.none()),
    max_size=3,
)


@given(st.lists(event_fields, min_size=2, max_size=25), st.data())
def test_verify_names_any_edited_line_but_the_last(events, data):
    with tempfile.TemporaryDirectory() as tmp:
        rundir = RunDir(Path(tmp))
        for fields in events:
            rundir.log.append_event("rollout", **fields)
        path = rundir.events_path
        lines = path.read_text().splitlines()
        assert verify_events(path) == (len(events), None)
        edited = data.draw(st.integers(0, len(lines) - 2), label="edited line (0-based)")
        event = json.loads(lines[edited])
        event["note"] = "edited" if event.get("note") != "edited" else "edited again"
        lines[edited] = json.dumps(event, sort_keys=True)
        path.write_text("\n".join(lines) + "\n")
        intact, problem = verify_events(path)
        assert intact == edited
        assert problem is not None and problem.startswith(f"line {edited + 1} was edited")
