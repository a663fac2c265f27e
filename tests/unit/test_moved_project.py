"""A run dir belongs to its project wherever the project lives: a project that is moved, or
checked out by CI in another folder, continues its run there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from pytest_capevolve._project.spec import load_spec, rebase, to_stored
from pytest_capevolve._store.rundir import RunDir, RunDirError


def old_style_lock(project: Path) -> dict:
    """``spec.lock.yaml`` as runs before the fix wrote it: every path absolute."""
    spec = load_spec(project)
    return {
        **spec.to_lock(),
        "path": str(project / "capevolve.yaml"),
        "project_dir": str(project),
        "capability_path": str(project / "capability"),
        "split_ids_file": str(project / "splits.yaml"),
    }


def test_an_old_absolute_path_lock_is_accepted_where_the_project_now_lives(
    pytester: pytest.Pytester, example
) -> None:
    old = example("toy_calc", dest="old/toy_calc").resolve()
    ids = [f"q{i:02d}" for i in range(24)]
    (old / "splits.yaml").write_text(yaml.safe_dump({"train": ids[:6], "val": ids[6:18], "test": ids[18:]}))
    spec_file = old / "capevolve.yaml"
    lines = [line for line in spec_file.read_text().splitlines() if not line.startswith("split_")]
    spec_file.write_text("\n".join(lines) + "\nsplit_ids_file: splits.yaml\n")
    lock = old_style_lock(old)
    runs = old / ".capevolve" / "runs" / "20240101-000000-abcdef"
    runs.mkdir(parents=True)
    (runs / "spec.lock.yaml").write_text(yaml.safe_dump(lock, sort_keys=True))
    RunDir(runs).log.append_event("run_created", spec=str(old / "capevolve.yaml"), run_id=runs.name)

    new = pytester.path / "elsewhere" / "toy_calc"
    new.parent.mkdir()
    shutil.move(old, new)
    rundir = RunDir.resolve(new.resolve())
    before = rundir.spec_lock_path.read_text()
    rundir.ensure_spec_lock(load_spec(new))  # the same places, relative to the project
    assert rundir.spec_lock_path.read_text() == before  # accepted as it is, not rewritten

    # a lock that really pointed elsewhere in the project is still refused
    elsewhere = {**lock, "capability_path": str(old / "candidates" / "careful")}
    rundir.spec_lock_path.write_text(yaml.safe_dump(elsewhere, sort_keys=True))
    with pytest.raises(RunDirError, match="capability_path changed since run"):
        rundir.ensure_spec_lock(load_spec(new))


def test_paths_are_stored_relative_inside_the_project_and_absolute_outside(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "capability").mkdir(parents=True)
    assert to_stored(project / "capability", project) == "capability"
    assert to_stored(project, project) == "."
    assert to_stored(tmp_path / "shared", project) == str(tmp_path / "shared")
    assert rebase("/old/proj/candidates/a", "/old/proj") == "candidates/a"
    assert rebase("/old/projx/a", "/old/proj") == "/old/projx/a"  # a sibling is not inside
    assert rebase("/elsewhere/a", "/old/proj") == "/elsewhere/a"
    assert rebase("candidates/a", "/old/proj") == "candidates/a"
    assert rebase("/old/proj/a", None) == "/old/proj/a"
