"""Issue 24, damage to a session replayed: a disk that fills mid-session, a run dir made
read-only, a session that dies holding claims another session waits on. Each ends in one line
(never an INTERNALERROR traceback), uses nothing half-written, and the next session resumes,
paying each rollout once.

Sessions run on a copy of ``examples/noisy_agent`` cut to one trial, after its baseline
(``one_trial_baseline``: built once per process, a copy each).
"""

from __future__ import annotations

import errno
import json
import os
import types
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._store import files as files_module
from pytest_capevolve._store.log import events as events_module


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _rollout_keys(run_dir: Path) -> list[tuple]:
    return [
        (e["split"], e["task_id"], e["tag"], e["trial"]) for e in _events(run_dir) if e["kind"] == "rollout"
    ]


class FullDisk:
    """The store's writes as on a disk that fills after ``room`` rollout events: the event
    being written when it fills is torn (half its bytes land), and every write after it —
    log lines, rollout files, state.json, verdicts — fails with ENOSPC."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, room: int) -> None:
        self.room, self.full = room, False
        real_write, real_write_all = os.write, files_module._write_all

        def write(fd: int, data) -> int:
            if not self.full and b'"kind": "rollout"' in bytes(data):
                self.room -= 1
                if self.room < 0:
                    self.full = True
                    real_write(fd, bytes(data)[: len(data) // 2])  # a torn line
            if self.full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, data)

        def write_all(fd: int, data: bytes) -> None:
            if self.full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_write_all(fd, data)

        monkeypatch.setattr(events_module, "os", types.SimpleNamespace(**{**vars(os), "write": write}))
        monkeypatch.setattr(files_module, "_write_all", write_all)


@pytest.mark.attack(
    "damage",
    attack="the disk fills mid-session, tearing a log line (~106 `INTERNALERROR` lines, before)",
    outcome=(
        "one line and exit 12; the torn line is cut off, nothing is judged or booked, and the next "
        "session resumes, recording each rollout once"
    ),
)
@pytest.mark.parametrize("xdist", ["", "-n 2"])
def test_a_disk_that_fills_mid_session_ends_in_one_line_and_the_next_session_resumes(
    one_trial_baseline, projects, capevolve, monkeypatch, xdist
) -> None:
    """The disk fills after 5 rollouts of a gate session (with and without xdist: the
    controller alone writes). One line and exit 12 — no INTERNALERROR — no verdict and no
    decision from the partial evidence, the torn log line cut off; with room again the same
    command resumes and every rollout is recorded once."""
    project = one_trial_baseline  # a copy of the baseline, built once per process
    run_dir = projects.run_dir(project)
    disk = FullDisk(monkeypatch, room=5)
    full = capevolve(project, "improved", gate=True, extra=xdist.split())
    out, err = full.stdout.str(), full.stderr.str()
    assert disk.full
    assert "INTERNALERROR" not in out + err and "Traceback" not in out + err, (out + err)[-3000:]
    said = [line for line in (out + err).splitlines() if "No space left on device" in line]
    assert len(said) == 1 and "resume" in said[0], (out + err)[-3000:]
    assert full.ret == 12
    assert not (run_dir / "verdicts" / "improved.json").exists()  # nothing judged on it
    kinds = [e["kind"] for e in _events(run_dir)]
    assert "decision" not in kinds and "verdict" not in kinds  # nothing booked
    assert not (run_dir / "claims").exists() or not list((run_dir / "claims").iterdir())
    monkeypatch.undo()  # room on the disk again
    resumed = capevolve(project, "improved", gate=True)
    assert resumed.ret in (0, 10), resumed.stdout.str()[-2000:]
    keys = _rollout_keys(run_dir)
    assert len(keys) == len(set(keys)) == 40 * 4  # every rollout recorded once: the torn line is none
    assert (run_dir / "verdicts" / "improved.json").exists()
    assert main(["verify", str(run_dir)]) == 0


class ReadOnly:
    """The run dir as on a read-only file system (``chmod -R a-w``, and, since root writes
    anyway, every write under it refused with EACCES as the kernel would refuse a user)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        import builtins
        import io
        import stat

        for path in [root, *root.rglob("*")]:
            if not path.is_symlink():
                path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
        self.root, self.refused = str(root.resolve()), 0
        writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
        real_open, real_io_open = os.open, io.open

        def inside(path) -> bool:
            try:
                return os.path.abspath(os.fspath(path)).startswith(self.root)
            except TypeError:
                return False

        def refuse(path):
            self.refused += 1
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

        def guarded(real, *, flags_at=None, mode_at=None):
            def call(path, *args, **kwargs):
                if inside(path):
                    if flags_at is not None and (args[0] if args else kwargs.get("flags", 0)) & writes:
                        refuse(path)
                    if mode_at is not None and any(
                        c in (args[0] if args else kwargs.get("mode", "r")) for c in "wax+"
                    ):
                        refuse(path)
                    if flags_at is None and mode_at is None:
                        refuse(path)
                return real(path, *args, **kwargs)

            return call

        monkeypatch.setattr(os, "open", guarded(real_open, flags_at=1))
        monkeypatch.setattr(builtins, "open", guarded(real_io_open, mode_at=1))
        monkeypatch.setattr(io, "open", guarded(real_io_open, mode_at=1))
        for name in ("replace", "rename", "unlink", "mkdir", "rmdir", "remove"):
            monkeypatch.setattr(os, name, guarded(getattr(os, name)))


@pytest.mark.attack(
    "damage",
    attack="a read-only run dir (`chmod -R a-w`; `verify` and `measure` crashed, before)",
    outcome=(
        "`verify` verifies it; `measure` prints its table and one line saying report.md was not "
        "written, or, with the test split unscored, one line saying scoring it needs a writable run"
    ),
)
@pytest.mark.parametrize("finalized", [True, False])
def test_a_read_only_run_dir_is_verified_and_measured_in_one_line(
    one_trial_baseline, projects, capevolve, capsys, monkeypatch, finalized
):
    """``chmod -R a-w`` on the run dir (a CI artifact kept as it was): ``verify`` still
    verifies it — reading needs no write — and ``measure`` prints its table with one line
    saying report.md could not be written, or, with the test split unscored (scoring it writes
    the run), one line saying so; never a traceback."""
    project = one_trial_baseline
    run_dir = projects.run_dir(project)
    if finalized:
        assert main(["measure", str(project), "--finalize"]) == 0
    capsys.readouterr()
    read_only = ReadOnly(monkeypatch, run_dir)
    outputs = {}
    for command in ("verify", "measure"):
        code = main([command, str(project), *(["--finalize"] if command == "measure" else [])])
        captured = capsys.readouterr()
        outputs[command] = (code, captured.out + captured.err)
    refused = read_only.refused
    monkeypatch.undo()
    for _, out in outputs.values():
        assert "Traceback" not in out, out
    code, out = outputs["verify"]
    assert code == 0 and out.startswith("ok "), out  # a read-only record verifies
    code, out = outputs["measure"]
    if finalized:
        assert code == 0 and "report.md not written" in out and "read-only" in out, out
        assert refused  # the report's write was refused, and said so
    else:
        lines = [line for line in out.splitlines() if line.strip()]
        assert code == 4 and len(lines) == 1 and "is read-only" in lines[0] and "unscored" in lines[0], out


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.attack(
    "damage",
    attack=(
        "a session killed holding claims, their lock kept by a process it left running (the next "
        'session waited, or skipped them: "0 paid, 300 reused", exit 12)'
    ),
    outcome=(
        "the claim's owner (pid, host, start time) is dead: the claim is void, the next session takes "
        "the work over and pays each rollout once; a session waiting on it stops waiting"
    ),
)
def test_a_claim_whose_session_died_is_taken_over_and_each_rollout_paid_once(
    one_trial_baseline, projects, capevolve
) -> None:
    """A session killed while it held claims, its claim's lock kept by a process it left
    running (here: this test holds it): the claim names a dead pid. The next session does not
    wait on it nor skip its rollouts ("0 paid, 40 reused", exit 12, before): it takes the work
    over, pays each rollout once, and the dead claim is gone."""
    import fcntl
    import socket

    project = one_trial_baseline
    run_dir = projects.run_dir(project)
    val = json.loads((run_dir / "splits.json").read_text())["val"]
    claims = run_dir / "claims"
    claims.mkdir(exist_ok=True)
    dead = claims / "999999-deadbeef.json"
    keys = [["val", task, "improved", 0] for task in val]
    dead.write_text(
        json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "since": 0.0, "keys": keys})
    )
    with open(dead, encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what the dead session left running still holds it
        result = capevolve(project, "improved")
        assert result.ret == 0, result.stdout.str()[-2000:]
    paid = [k for k in _rollout_keys(run_dir) if k[2] == "improved"]
    assert sorted(paid) == sorted(tuple(k) for k in keys)  # each paid, once
    assert not dead.exists()
    result.stdout.fnmatch_lines(["*rollouts: 40 paid, 40 reused*"])
