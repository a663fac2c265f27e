"""Running the optimizer command of one hill-climb iteration, under a timeout.

Used by :mod:`.hill_climb` once per iteration, in the user's process, after the prompt and the
handover files are written. A crash, a timeout (the whole process group is killed) or a non-zero
exit is an outcome, never an exception: the loop then restores an unchanged copy of the parent,
which the gate rejects — a wasted iteration, not a dead run.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def optimizer_argv(command: str, workdir: Path, prompt: Path) -> list[str]:
    """The optimizer's argv: ``command`` split like a shell would, ``{workdir}`` and ``{prompt}``
    substituted in every part."""
    return [
        part.replace("{workdir}", str(workdir)).replace("{prompt}", str(prompt))
        for part in shlex.split(command)
    ]


def run_optimizer(argv: list[str], *, cwd: Path, timeout: float, folder: Path) -> dict[str, Any]:
    """Run ``argv`` in ``cwd`` with its output in ``folder/optimizer.stdout|stderr``; the answer
    (argv, exit code, timed out, seconds, outcome, ok) becomes ``optimizer.json``."""
    start = time.monotonic()
    timed_out = False
    code: int | None = None
    error = None
    with open(folder / "optimizer.stdout", "w") as out, open(folder / "optimizer.stderr", "w") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            error = f"could not start: {exc}"
        else:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                code = proc.wait()
    seconds = time.monotonic() - start
    if error is not None:
        outcome = error
    elif timed_out:
        outcome = f"timed out after {timeout:g} s (process group killed)"
    elif code != 0:
        outcome = f"exited {code}"
    else:
        outcome = "ok"
    return {
        "argv": argv,
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(seconds, 3),
        "outcome": outcome,
        "ok": outcome == "ok",
    }
