"""Launching a capevolve pytest session as a child process: the one place that spells
``python -m pytest --capevolve-<mode> SPEC …``, so every guard and the seal behave as in a
session a user starts."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .._project import harness

QUIET = ("-q", "--tb=no", "-p", "no:cacheprovider")
"""pytest's own output a child session does without: its summary is the capevolve one."""


def session_command(
    spec_path: Path,
    *,
    mode: str = "run",
    run_id: str | None = None,
    quiet: Sequence[str] = QUIET,
    workers: int = 0,
    ini: dict[str, str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv of one ``--capevolve-<mode> SPEC`` session on ``run_id``, its conftests cut at
    the project (:func:`.._project.harness.pinned`), with ``-o`` per ``ini`` entry and ``extra``."""
    argv = [sys.executable, "-P", "-m", "pytest", f"--capevolve-{mode}", str(spec_path)]
    argv += harness.pinned(spec_path.parent)  # nothing planted above the project is imported
    argv += ["--capevolve-run-id", run_id] if run_id else []
    argv += list(quiet)
    for key, value in (ini or {}).items():
        argv += ["-o", f"capevolve_{key}={value}"]
    argv += ["-n", str(workers)] if workers else []
    return argv + list(extra)


def gate_flags(workdir: Path, tag: str, *, no_regression: str | None = None) -> list[str]:
    """The flags of a gate session on a work copy whose decision its driver books."""
    flags = ["--capevolve-candidate", str(workdir), "--capevolve-tag", tag, "--capevolve-gate"]
    flags += ["--capevolve-commit", "none"]
    if no_regression:
        flags += ["--capevolve-veto-regressions", "--capevolve-regression-rule", no_regression]
    return flags


def run_logged(argv: list[str], cwd: Path, log_path: Path) -> int:
    """Run a session, its command line and output appended to ``log_path``; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    return done.returncode


def run_captured(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a session with its output captured (the caller decides where it goes)."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)


def run_attached(argv: list[str], cwd: Path) -> int:
    """Run a session on this process's own stdout and stderr; returns its exit code."""
    return subprocess.run(argv, cwd=cwd, check=False).returncode
