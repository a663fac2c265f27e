"""The run dir's kept descriptors (the lock's, the log's) belong to the process that opened them: a
child, however made, sees them as not its own and opens its own (the lock asks the kernel for the
process id each time; only temp names use the id kept once per process)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from pytest_capevolve._store import files


def test_a_forked_child_knows_its_own_id_and_does_not_use_its_parents_descriptors(tmp_path: Path) -> None:
    lock = files.RunLock(tmp_path)
    with lock:
        pass
    kept = lock._kept
    assert kept is not None and kept.names(os.stat(lock.path))
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report, then leave without running the parent's cleanups
        try:
            said = f"{files.pid() == os.getpid()} {kept.names(os.stat(lock.path))}"
            with lock:  # locks with a descriptor of its own
                said += f" {lock._kept is not kept}"
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(child, 0)
    assert said == "True False True"
    assert files.pid() == os.getpid() and kept.names(os.stat(lock.path))  # the parent's, still open


def _forked_by(way: str, report) -> None:
    """Run ``report()`` in a child made ``way``; it writes what it saw to a pipe."""
    if way == "subprocess's preexec_fn":
        subprocess.run(["true"], preexec_fn=report, check=True)
    elif way == "multiprocessing, fork":
        child = multiprocessing.get_context("fork").Process(target=report)
        child.start()
        child.join()
    else:  # C code that forks: libc's fork(), which runs no os.register_at_fork hook
        pid = ctypes.PyDLL(None).fork()  # the GIL kept across the call: no other thread holds it in the child
        if pid == 0:
            try:
                report()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


@pytest.mark.attack(
    "damage",
    attack=(
        "a child forked in the record keeper's process (by the adapter's `score`, a plugin) other than "
        "by `os.fork`: subprocess's `preexec_fn`, multiprocessing's `fork` start method, C code calling "
        "libc's `fork()`; `os.posix_spawn` and `spawn`/`forkserver` children run no code of the parent's"
    ),
    outcome=(
        "prevented: the lock asks the kernel for the process id each time it is taken, so the child "
        "opens the run's lock anew (never its parent's descriptor: the kernel's lock would hold both); "
        "a temp name made with the id kept once per process is taken with O_EXCL (a clash takes the "
        "next number)"
    ),
)
@pytest.mark.parametrize(
    "way",
    [
        "subprocess's preexec_fn",
        "multiprocessing, fork",
        "libc fork()",
    ],
)
def test_a_child_forked_otherwise_than_by_os_fork_never_takes_its_parents_lock(tmp_path: Path, way) -> None:
    lock = files.RunLock(tmp_path)
    with lock:
        pass
    kept = lock._kept
    read, write = os.pipe()

    def report() -> None:
        os.write(write, f"{lock._descriptor() is not kept}".encode())

    _forked_by(way, report)
    os.close(write)
    said = os.read(read, 100).decode()
    os.close(read)
    assert said == "True"
    assert lock._kept is kept
