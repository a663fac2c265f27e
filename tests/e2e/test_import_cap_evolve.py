"""`capevolve import-cap-evolve` on a cap-evolve project and run dir in cap-evolve's own layout,
built from the real tau2 run in tests/data (val: shared_data; test: its sealed FINAL scores)."""

from __future__ import annotations

from cap_evolve_project import _import


def test_a_session_on_the_imported_run_pays_nothing_already_paid(cap_evolve, tmp_path, capsys, capevolve):
    project, run = cap_evolve
    dest = tmp_path / "here"
    _import(capsys, project, dest, "--run", run)
    result = capevolve(dest, extra=["-q"])
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["seed *val*12*5*0.567*", "rollouts: 0 paid, 60 reused*"])
