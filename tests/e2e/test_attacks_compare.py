"""Attacks on ``capevolve compare`` inputs (issue 41's readers), landed this session.

Missing data is never a 0, and a candidate whose errored trials could flip the decision is
indecisive (worst-case imputation). A candidate file that simply has no rows for its losing
tasks was not weighed that way: those tasks were "in one run only", and the rest accepted.
"""

from __future__ import annotations

import json

from pytest_capevolve._cli.main import main


def _write(path, rows) -> str:
    path.write_text("task_id,trial,reward\n" + "".join(f"{t},0,{r}\n" for t, r in rows))
    return str(path)


def test_a_candidate_file_without_its_losing_tasks_is_not_accepted(tmp_path, capsys) -> None:
    # a no-op: equal on 40 tasks, better on 10, worse on 10 (mean delta 0)
    base = [(f"t{i}", 1 if 50 <= i < 60 else (0 if 40 <= i < 50 else i % 2)) for i in range(60)]
    cand = [(t, 1 - r if 40 <= int(t[1:]) < 60 else r) for t, r in base]
    kept = [(t, r) for t, r in cand if not 50 <= int(t[1:]) < 60]  # its 10 losses left out: 83 % coverage
    honest = main(["compare", _write(tmp_path / "a.csv", base), _write(tmp_path / "all.csv", cand), "--json"])
    assert honest != 0 and json.loads(capsys.readouterr().out)["comparisons"][0]["decision"] == "reject"
    code = main(["compare", _write(tmp_path / "a.csv", base), _write(tmp_path / "b.csv", kept), "--json"])
    [verdict] = json.loads(capsys.readouterr().out)["comparisons"]
    assert code != 0 and verdict["decision"] == "indecisive", verdict["reason"]
    assert "worst-case imputation of the missing trials" in verdict["reason"]
