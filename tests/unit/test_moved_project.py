"""A run dir belongs to its project wherever the project lives: a project that is moved, or
checked out by CI in another folder, continues its run there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.main import main
from pytest_capevolve._project.spec import load_spec, to_stored
from pytest_capevolve._show.runs import list_runs
from pytest_capevolve._store.rundir import RunDir, RunDirError


def old_style_lock(project: Path) -> dict:
    """``spec.lock.yaml`` as development builds before 0.1.0 wrote it: every path absolute."""
    spec = load_spec(project)
    return {
        **spec.to_lock(),
        "path": str(project / "capevolve.yaml"),
        "project_dir": str(project),
        "capability_path": str(project / "capability"),
    }


def test_a_pre_release_lock_is_refused_naming_a_new_run(tmp_path: Path, example, capsys) -> None:
    """A run dir a development build wrote (absolute paths, or no guard keys in its lock) is
    refused in one line that names the way on, never read with today's meaning guessed: by a
    session (its lock checked) and by every reader that opens it (the newest run, ``--run-id``, a
    run dir given to ``capevolve verify``), before any reader of its files runs."""
    project = example("toy_calc").resolve()
    runs = project / ".capevolve" / "runs" / "20240101-000000-abcdef"
    runs.mkdir(parents=True)
    rundir = RunDir(runs)
    today = load_spec(project).to_lock()
    for lock, why in (
        (old_style_lock(project), "its paths are absolute"),
        ({k: v for k, v in today.items() if k != "protected_paths"}, "it has no protected_paths"),
    ):
        rundir.spec_lock_path.write_text(yaml.safe_dump(lock, sort_keys=True))
        said = f"development build before pytest-capevolve 0.1.0 \\({why}\\)"
        with pytest.raises(RunDirError, match=said):
            rundir.ensure_spec_lock(load_spec(project))
        for run_id in (None, runs.name):
            with pytest.raises(RunDirError, match=said):
                RunDir.resolve(project, run_id, create=False)
        (runs / "events.jsonl").touch()
        assert main(["verify", str(runs)]) == exitcodes.USAGE
        assert re.search(said, capsys.readouterr().err)
        assert re.search(said, list_runs(project)[0]["error"])  # `capevolve runs`: its row says why
    rundir.spec_lock_path.write_text(yaml.safe_dump(today, sort_keys=True))
    rundir.ensure_spec_lock(load_spec(project))  # today's lock: read as it is
    assert RunDir.resolve(project, create=False).root == runs


def test_paths_are_stored_relative_inside_the_project_and_absolute_outside(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "capability").mkdir(parents=True)
    assert to_stored(project / "capability", project) == "capability"
    assert to_stored(project, project) == "."
    assert to_stored(tmp_path / "shared", project) == str(tmp_path / "shared")


def test_a_run_in_todays_format_has_its_lock_parsed_once_where_it_is_checked(example, monkeypatch) -> None:
    """Its log froze the keys, so opening it is no reason to parse the lock: the session's lock
    check parses it, once (a development build's run is still refused at the open, above)."""
    project = example("toy_calc").resolve()
    root = project / ".capevolve" / "runs" / "20240101-000000-abcdef"
    root.mkdir(parents=True)
    spec = load_spec(project)
    RunDir(root).ensure_spec_lock(spec)  # a new run: lock written, frozen keys logged
    parsed: list[str] = []
    real = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda stream: parsed.append("lock") or real(stream))
    rundir = RunDir.resolve(project, create=False)
    assert parsed == []
    rundir.ensure_spec_lock(spec)
    assert parsed == ["lock"]
