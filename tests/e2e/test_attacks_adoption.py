"""Attacks on adopting an earlier run's accept (``capevolve commit TAG --decision accept`` on a
REPEAT in a new run; hill-climb asks the same check): what a user edits in the earlier run's folder
to get a best no gate accepted."""

from __future__ import annotations

import json

import pytest
from cli_calls import run
from fix_list_project import fixing, make_fix_list, split_ids


@pytest.mark.attack(
    "laundering",
    attack=(
        "the earlier run's snapshot of accepted bytes edited (made writable, every val task fixed), then "
        "those accepted bytes repeated in a new run and `capevolve commit TAG --decision accept`: the new "
        "run registered the edited snapshot as its best, never gated"
    ),
    outcome=(
        "refused: the earlier snapshot must hash to the bytes that run registered and this run's repeat "
        "names; nothing is registered or booked"
    ),
)
def test_an_edited_snapshot_of_accepted_bytes_is_not_adopted(example, projects, capevolve, capsys):
    project = make_fix_list(example, projects)
    assert capevolve(project).ret == 0
    val = split_ids(project, "val")
    fixing(project, "big", val[:5])
    assert capevolve(project, "big", gate=True, extra=["--capevolve-commit", "auto"]).ret == 0
    snapshot = projects.run_dir(project) / "candidates" / "big" / "files"
    snapshot.chmod(0o755)
    (snapshot / "prompt.md").chmod(0o644)
    (snapshot / "prompt.md").write_text(
        (project / "candidates" / "big" / "prompt.md").read_text() + "fix all\n"
    )
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    # before: exit 0, best 'big' registered from the edited snapshot (another content hash), unpaid
    assert code != 0 and "no longer holds the bytes it registered" in err, err
    assert "gate a changed version" in err
    second = projects.run_dir(project)
    events = [json.loads(line) for line in (second / "events.jsonl").read_text().splitlines()]
    assert not [
        e for e in events if e["kind"] in ("decision", "candidate_registered") and e.get("tag") == "big"
    ]
    assert json.loads((second / "state.json").read_text())["best_id"] == "seed"
