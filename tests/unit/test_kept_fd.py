"""The run dir's kept descriptors (the lock's, the log's) belong to the process that opened them: a
child made with ``os.fork`` sees them as not its own and opens its own, although the process id is
asked of the kernel only once per process."""

from __future__ import annotations

import os
from pathlib import Path

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
