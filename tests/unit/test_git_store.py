"""The git candidate store leaves no git process behind. gitpython answers ``repo.head.commit``
through persistent ``git cat-file`` processes that end only when the repo is closed; a store
that left that to the garbage collector held them for as long as a climb ran, and the suite
saw "subprocess … is still running" from whichever later test the collector happened to run in
(a failure under ``filterwarnings = error`` that depended on the machine's timing)."""

from __future__ import annotations

import gc
import os
import warnings
from pathlib import Path

import pytest

from pytest_capevolve._loop.git_store import StoreError, open_store, store_anchor


def _git_children() -> list[str]:
    """The command lines of this process's living children that run git."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # ended while we looked
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"git" in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/stat").exists(), reason="reads /proc (Linux)")
def test_recording_and_reading_the_git_store_leave_no_git_process_running(tmp_path: Path) -> None:
    files = tmp_path / "cand"
    files.mkdir()
    (files / "prompt.md").write_text("be brief\n")
    gc.disable()  # what the store leaves must be gone without the collector's help
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store = open_store("git", tmp_path / "run")
            (tmp_path / "run" / "hill_climb").mkdir(parents=True)
            sha = store.record("cand", files, "cand: accepted", accepted=True)
            assert isinstance(sha, str) and len(sha) == 40
            assert _git_children() == []
            with pytest.raises(StoreError, match="carries no anchor"):
                store_anchor(store.root)  # reads the newest commit: a message with no anchor
            assert _git_children() == []
            del store
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    finally:
        gc.enable()
