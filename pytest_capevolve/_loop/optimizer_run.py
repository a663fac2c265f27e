"""Running the optimizer command of one hill-climb iteration, under a timeout.

Inside :mod:`.optimizer_boundary`, with a scratch ``TMPDIR``. A crash, a timeout (the process
group is killed) or a non-zero exit is an outcome, never an exception: the parent's bytes are
restored, a wasted iteration, not a dead run."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from .._confine.landlock import Boundary, expected
from .._confine.launch import command, environment
from .optimizer_cost import reported_cost

STARTED_BY = "capevolve hill-climb"


def optimizer_argv(command: str, workdir: Path, prompt: Path) -> list[str]:
    """``command`` split like a shell would, ``{workdir}`` and ``{prompt}`` substituted."""
    return [
        part.replace("{workdir}", str(workdir)).replace("{prompt}", str(prompt))
        for part in shlex.split(command)
    ]


REDACTED = "[redacted]"
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)[A-Za-z0-9_.-]*"
_SECRET_ASSIGNED = re.compile(rf"^(-{{0,2}}{_SECRET_NAME}=)(.+)$", re.IGNORECASE)  # KEY=v, --api-key=v
_SECRET_FLAG = re.compile(rf"^--?{_SECRET_NAME}$", re.IGNORECASE)  # --api-key v: v is the secret
_PROVIDER_KEY = re.compile(r"\b(?:sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{8,}")  # sk-…, ghp_…


def redacted(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """``argv`` fit for the record: values of secret-looking names (``--api-key …``), provider
    key patterns (``sk-…``) and secret-looking environment values become ``[redacted]``."""
    env = os.environ if environ is None else environ
    named = [value for name, value in env.items() if re.fullmatch(_SECRET_NAME, name, re.IGNORECASE)]
    secrets = sorted((value for value in named if len(value) >= 8), key=len, reverse=True)
    out: list[str] = []
    for index, part in enumerate(argv):
        if index and _SECRET_FLAG.match(argv[index - 1]):
            out.append(REDACTED)
            continue
        for secret in secrets:
            part = part.replace(secret, REDACTED)
        part = _PROVIDER_KEY.sub(REDACTED, part)
        assigned = _SECRET_ASSIGNED.match(part)
        out.append(f"{assigned.group(1)}{REDACTED}" if assigned else part)
    return out


def run_optimizer(
    argv: list[str], *, cwd: Path, timeout: float, folder: Path, boundary: Boundary | None = None
) -> dict[str, Any]:
    """Run ``argv`` in ``cwd`` inside ``boundary`` plus a scratch ``TMPDIR``, its output in
    ``folder/optimizer.stdout|stderr``; the answer becomes ``optimizer.json``."""
    with tempfile.TemporaryDirectory(prefix="capevolve-optimizer-") as scratch:
        state = expected()
        env = {**os.environ, "TMPDIR": scratch, **environment(state, STARTED_BY)}
        started = argv
        if boundary is not None:
            writable = (*boundary.writable, Path(scratch))
            started = command(Boundary(writable, boundary.readable, boundary.hidden, boundary.read_all), argv)
        result = _run(started, cwd=cwd, timeout=timeout, folder=folder, env=env)
    return {
        "argv": redacted(argv),  # written to optimizer.json: no API key in the run dir
        **result,
        "confinement": state.label if boundary is not None else "unconfined (no boundary asked)",
        **reported_cost(folder / "optimizer.stdout"),  # its $ and tokens, booked with the decision
    }


def _run(argv: list[str], *, cwd: Path, timeout: float, folder: Path, env: dict[str, str]) -> dict[str, Any]:
    start = time.monotonic()
    timed_out = False
    code: int | None = None
    error = None
    with open(folder / "optimizer.stdout", "w") as out, open(folder / "optimizer.stderr", "w") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err, start_new_session=True, env=env)
        except OSError as exc:
            error = f"could not start: {exc}"
        else:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
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
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(seconds, 3),
        "outcome": outcome,
        "ok": outcome == "ok",
    }
