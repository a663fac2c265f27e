"""A loop's optimizer: the boundary it works in, its run under a timeout, the cost it reports.

The boundary (hill-climb's optimizer command, ``capevolve agent``): it writes its work copies, a
scratch ``TMPDIR`` and ``--writable`` folders outside the project, and reads the machine but the
run dirs and the project's gold files; nothing above the project is writable, so no
``conftest.py`` or ``pytest.ini`` can be planted where pytest looks. Where the kernel cannot hold
it (:mod:`.._confine.landlock`), the optimizer runs unconfined and the record says so.

A crash, a timeout (its process group killed) or a non-zero exit is an outcome, not an exception:
the parent's bytes are restored, a wasted iteration, not a dead run. Its cost is the largest JSON
line of its stdout with ``cost_usd`` and/or ``tokens`` (a running total is printed again at the
end), read after it exits (what it spent was spent) and booked with the decision, so ``max_usd``
counts the proposer. A value that is not a spend (negative, NaN, above 1e6 $) is refused; the
iteration stays unproposed and ``--resume`` runs its optimizer again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._confine.landlock import Boundary, expected
from .._confine.launch import command, environment
from .._policy.booking.journal_entry import escaped
from .._policy.budget.optimizer_spend import SpendRefused, checked_tokens, checked_usd
from .._project import harness
from .._project.spec import Spec
from ..exitcodes import Refusal

RUNS_FOLDER = ".capevolve"
STARTED_BY = "capevolve hill-climb"
COST_KEYS = ("cost_usd", "tokens")


def gold_files(spec: Spec) -> list[Path]:
    """The project's files an optimizer may not read: its evaluation data and split ids."""
    patterns = [*spec.harness_files, harness.DEFAULT_WORD]
    files = harness.harness_files(spec.project_dir, patterns, exclude=[spec.capability_path])
    if spec.split_ids_file is not None:
        files.append(spec.split_ids_file.resolve())
    return sorted(set(files))


def optimizer_boundary(
    spec: Spec, writable: Iterable[Path], readable: Iterable[Path] = (), also_writable: Iterable[Path] = ()
) -> Boundary:
    """The boundary of an optimizer that may write ``writable`` and ``also_writable`` (checked:
    :func:`checked_writable`) and read ``readable`` (its prompt, say) besides the project; the
    run dir, the gold files and a shared ledger (which lists the sealed test ids) hidden."""
    ledger = () if spec.shared_ledger is None else (spec.shared_ledger,)
    hidden = (spec.project_dir.resolve() / RUNS_FOLDER, *gold_files(spec), *ledger)
    extra = checked_writable(spec, also_writable)
    return Boundary(
        writable=tuple(Path(p) for p in (*writable, *extra)),
        readable=tuple(Path(p) for p in readable),
        hidden=hidden,
        read_all=True,
        listable=(spec.project_dir.resolve(),),  # `ls`, and globs such as .capevolve/runs/*/work/TAG
    )


def checked_writable(spec: Spec, folders: Iterable[Path]) -> tuple[Path, ...]:
    """``--writable`` folders (or files), refused when one is the project, inside it or holds it."""
    project = spec.project_dir.resolve()
    out = []
    for folder in folders:
        real = Path(os.path.realpath(folder.expanduser()))
        if real == project or project in real.parents or real in project.parents:
            raise Refusal(
                f"--writable {folder}: the optimizer may not write the project, a folder in it or one "
                "holding it (the record and the harness are there); name a folder outside the "
                "project, such as the agent's own state folder"
            )
        if not real.exists():
            raise Refusal(f"--writable {folder}: no such file or folder; create it first")
        out.append(real)
    return tuple(out)


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
    elif code != 0:  # what it said last, and where the rest is: a newcomer's wrong argv is one line
        with open(folder / "optimizer.stderr", "rb") as err:  # its tail only: an agent may log a lot
            err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))
            # escaped: a terminal escape in its words would erase the line they are printed in and forge one
            said = [escaped(s) for s in err.read().decode(errors="replace").splitlines() if s.strip()]
        outcome = f"exited {code}" + (f" ({said[-1][:200]}; see {folder}/optimizer.stderr)" if said else "")
    else:
        outcome = "ok"
    return {
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(seconds, 3),
        "outcome": outcome,
        "ok": outcome == "ok",
    }


def reported_cost(stdout: Path) -> dict[str, Any]:
    """``{"cost_usd": float, "tokens": int, "cost_line": N}`` from the optimizer's stdout, or
    ``{}`` when it printed no cost line; raises SpendRefused naming the file and line."""
    found: list[tuple[int, dict[str, Any]]] = []
    try:
        with stdout.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                text = line.strip()
                if not (text.startswith("{") and text.endswith("}")):
                    continue
                with contextlib.suppress(ValueError):  # not JSON: not a cost line
                    value = json.loads(text)
                    if isinstance(value, dict) and any(k in value for k in COST_KEYS):
                        found.append((number, value))
    except FileNotFoundError:
        return {}
    if not found:
        return {}
    usd: tuple[float, int] = (0.0, found[-1][0])
    tokens = 0
    for number, value in found:  # every line checked: a refused value anywhere is refused
        where = f"{stdout} line {number} (the optimizer's cost report)"
        try:
            line_usd = checked_usd(value.get("cost_usd", 0.0), where, "cost_usd")
            tokens = max(tokens, checked_tokens(value.get("tokens", 0), where, "tokens"))
        except SpendRefused as exc:
            raise SpendRefused(
                f"{exc}; nothing was booked: fix the optimizer's report, then --resume"
            ) from None
        if line_usd > usd[0]:
            usd = (line_usd, number)
    return {"cost_usd": usd[0], "tokens": tokens, "cost_line": usd[1]}
