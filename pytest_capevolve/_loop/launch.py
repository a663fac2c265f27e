"""Launching a capevolve pytest session as a child process: the one place that spells
``python -m pytest --capevolve-<mode> SPEC …``, so every guard and the seal behave as in a
session a user starts; among them the train evaluation ``capevolve measure --train`` pays (train
is never gated: its row is for the report only; ``auto`` pays it when train is not val's tasks
again and the seed or best lacks train rollouts, ``yes`` whatever is missing, ``no`` nothing)."""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .._policy.stop.afford import missing_rollouts
from .._project import harness
from .._project.candidate import SEED_TAG
from .._project.spec import Spec
from .._store.readers.evidence import index_records
from .._store.rundir import RunDir

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


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def stopped_with_parent() -> Callable[[], None] | None:
    """What a session child runs between fork and exec so that it stops when the process that
    started it dies (a ``kill -9`` of ``capevolve hill-climb``): the kernel sends it SIGINT, so it
    stops as a session stops on Ctrl-C — what it persisted is kept, its claims let go — and a
    resume pays only what is missing, instead of a child paying rollouts unattended that the
    resume then waits for. Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere None: the child
    outlives its parent, as before.

    The signal follows the *thread* that started the child: sessions are started from the loop's
    main thread, which lives as long as the loop does."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: no import after the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above: no signal will come
            os._exit(128 + signal.SIGINT)

    return in_child


def _run(argv: list[str], cwd: Path, **how: Any) -> subprocess.CompletedProcess[Any]:
    """One session child, stopped when this process dies (:func:`stopped_with_parent`)."""
    return subprocess.run(argv, cwd=cwd, check=False, preexec_fn=stopped_with_parent(), **how)


def run_logged(argv: list[str], cwd: Path, log_path: Path) -> int:
    """Run a session, its command line and output appended to ``log_path``; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        done = _run(argv, cwd, stdout=out, stderr=subprocess.STDOUT)
    return done.returncode


def run_captured(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a session with its output captured (the caller decides where it goes)."""
    return _run(argv, cwd, capture_output=True, text=True)


def run_shown(argv: list[str], cwd: Path, quiet_to: TextIO | None) -> int:
    """Run a session on this process's own stdout and stderr, or (``quiet_to``) its output
    written there once it ended; returns its exit code."""
    if quiet_to is None:
        return _run(argv, cwd).returncode
    done = run_captured(argv, cwd)
    quiet_to.write(done.stdout + done.stderr)
    return done.returncode


@dataclass(frozen=True)
class TrainPlan:
    """What ``--train`` pays: the rollouts still missing (0: nothing to pay) and why."""

    missing: int
    note: str


def missing_on(spec: Spec, rundir: RunDir, split: str, tags: list[str]) -> int:
    """The rollouts ``tags`` still lack on ``split``: every task, every trial."""
    ids = list((rundir.splits() or {}).get(split, []))
    records = index_records(rundir.rollouts.indexed_rollouts(split, tags))
    return missing_rollouts(records, tags, ids, spec.num_trials)


def plan_train(spec: Spec, rundir: RunDir, mode: str) -> TrainPlan:
    """Whether ``mode`` pays the train evaluation of the seed and the best, and the reason."""
    splits = rundir.splits() or {}
    train, val = list(splits.get("train", [])), list(splits.get("val", []))
    if not train:
        return TrainPlan(0, "empty: this split has no tasks")
    best = rundir.state.best()
    missing = missing_on(spec, rundir, "train", [SEED_TAG] if best == SEED_TAG else [SEED_TAG, best])
    if missing == 0:
        return TrainPlan(0, "evaluated")
    if mode == "no":
        return TrainPlan(
            0, f"not evaluated: measure --train no (the default); --train auto pays its {missing} rollouts"
        )
    if mode == "auto" and set(train) == set(val):
        return TrainPlan(0, "not evaluated: train holds val's tasks, so its numbers would be a copy of val's")
    return TrainPlan(missing, f"evaluating: {missing} train rollouts missing")


def evaluate_train(spec: Spec, rundir: RunDir, *, workers: int, quiet_to: TextIO | None) -> int:
    """One plain session on train for the best (and the seed); its exit code."""
    extra = ["--capevolve-split", "train"]
    if rundir.state.best() != SEED_TAG:
        extra += ["--capevolve-candidate", str(spec.capability_path), "--capevolve-tag", SEED_TAG]
    command = session_command(spec.path, run_id=rundir.run_id, workers=workers, extra=extra)
    return run_shown(command, spec.project_dir, quiet_to)
