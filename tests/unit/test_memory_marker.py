"""The project's marker of its memory (``capevolve.memory.json``, issue 25), and what it cannot hold."""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_capevolve._store import project_memory as memory

ROW = {"run_id": "r1", "tag": "careful", "decision": "reject"}


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def test_a_redirected_state_dir_is_read_through_the_marker(project, tmp_path, monkeypatch):
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "state"))
    memory.remember(project, "decisions", ROW)
    shutil.rmtree(project / ".capevolve")
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "empty"))
    (row, source), *_ = memory.recalled(project, "decisions")
    assert row["tag"] == "careful" and source == memory.OUTSIDE


def test_memory_out_of_sight_is_refused_and_a_deleted_marker_is_the_anchors_business(
    project, tmp_path, monkeypatch
):
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "state"))
    memory.remember(project, "decisions", ROW)
    shutil.rmtree(project / ".capevolve")
    shutil.move(tmp_path / "state", tmp_path / "state-moved")
    with pytest.raises(memory.MemoryOutOfSight, match=r"capevolve\.memory\.json records 1 row"):
        memory.recalled(project, "decisions")
    # every copy gone, the marker too: no file-level guard sees it (the anchor does)
    (project / memory.MARKER).unlink()
    assert memory.recalled(project, "decisions") == []


def test_the_newest_row_cut_from_both_copies_is_refused(project, tmp_path, monkeypatch):
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "state"))
    memory.remember(project, "decisions", ROW)
    memory.remember(project, "decisions", {**ROW, "tag": "helpful"})
    for copy in [memory.inside_path(project, "decisions"), memory.outside_path(project, "decisions")]:
        copy.write_text(copy.read_text().splitlines()[0] + "\n")
    with pytest.raises(memory.MemoryOutOfSight, match="records 2 row"):
        memory.recalled(project, "decisions")
    assert json.loads((project / memory.MARKER).read_text())["kinds"]["decisions"]["rows"] == 2


def test_the_default_state_folder_is_read_whatever_the_env_says_now(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(memory.STATE_DIR_ENV)
    memory.remember(project, "decisions", ROW)
    shutil.rmtree(project / ".capevolve")
    (project / memory.MARKER).unlink()  # the marker deleted too
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "empty"))
    assert [row["tag"] for row, _ in memory.recalled(project, "decisions")] == ["careful"]


def test_an_older_row_cut_from_both_copies_with_the_count_padded_is_refused(project, tmp_path, monkeypatch):
    monkeypatch.setenv(memory.STATE_DIR_ENV, str(tmp_path / "state"))
    memory.remember(project, "decisions", ROW)  # the refuted bytes
    memory.remember(project, "decisions", {**ROW, "tag": "helpful"})
    padding = json.dumps({**ROW, "tag": "padding"}, sort_keys=True)
    for copy in [memory.inside_path(project, "decisions"), memory.outside_path(project, "decisions")]:
        lines = copy.read_text().splitlines()
        copy.write_text("\n".join([padding, lines[1]]) + "\n")  # the newest kept, the count kept
    with pytest.raises(memory.MemoryOutOfSight):
        memory.recalled(project, "decisions")
