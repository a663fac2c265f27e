"""The shell examples of a documentation page, run as a reader would run them.

A page's ```` ```console ```` blocks hold ``$ command`` lines, each followed by lines of the
output it prints (``…`` matches anything; lines are matched in order, each against some later
line of the command's stdout and stderr). A command ends with ``# exit N`` when it is meant to
exit with N; any other must exit 0. ``cd DIR`` moves the reader for the commands after it.
Tests run every block of a page in order, in a fresh folder, with this environment's
``capevolve``, ``pytest`` and ``python`` first on PATH, so the docs cannot claim what the
code does not do.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = re.compile(r"^```console[^\n]*\n(.*?)^```", re.M | re.S)
EXIT = re.compile(r"\s+# exit (\d+)$")


@dataclass
class Command:
    line: str
    exit_code: int = 0
    expected: list[str] = field(default_factory=list)


def commands(text: str) -> list[Command]:
    """Every ``$`` command of a page's console blocks, in order, with its expected output."""
    found: list[Command] = []
    for block in BLOCK.findall(text):
        for raw in block.splitlines():
            if raw.startswith("$ "):
                line = raw[2:].strip()
                code = EXIT.search(line)
                found.append(Command(EXIT.sub("", line), int(code[1]) if code else 0))
            elif raw.strip():
                assert found, f"output before any command in a console block: {raw!r}"
                found[-1].expected.append(raw)
    return found


def pattern(expected: str) -> str:
    """An expected output line as an fnmatch pattern: ``…`` is a wildcard, brackets are literal."""
    escaped = re.sub(r"([\[\]?*])", r"[\1]", expected.rstrip())
    return escaped.replace("…", "*")


def unmatched(expected: list[str], output: list[str]) -> list[str]:
    """The expected lines the output does not show in that order (empty: it shows them all)."""
    at = 0
    for i, line in enumerate(expected):
        pat = pattern(line)
        while at < len(output) and not fnmatch.fnmatchcase(output[at].rstrip(), pat):
            at += 1
        if at == len(output):
            return expected[i:]
        at += 1
    return []


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    env["COLUMNS"] = "200"
    return env


def play(
    text: str, cwd: Path, *, timeout: float = 600, inside: Sequence[str] = ()
) -> list[tuple[Command, subprocess.CompletedProcess[str]]]:
    """Run a page's commands in order from ``cwd``; assert each exits and prints as the page says.
    ``inside``: the command they all run in, one shell for the whole page (``capevolve agent --``:
    the playbooks' agent, started once as an agent is)."""
    if inside:
        return _checked(_in_one_shell(commands(text), cwd, timeout, inside))
    env = environment()
    ran = []
    for command in commands(text):
        words = shlex.split(command.line)
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
            assert cwd.is_dir(), command.line
            continue
        result = subprocess.run(
            ["bash", "-c", command.line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        ran += _checked([(command, result)])
    return ran


def _checked(
    ran: list[tuple[Command, subprocess.CompletedProcess[str]]],
) -> list[tuple[Command, subprocess.CompletedProcess[str]]]:
    for command, result in ran:
        output = (result.stdout + result.stderr).splitlines()
        shown = f"$ {command.line}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        assert result.returncode == command.exit_code, shown
        missing = unmatched(command.expected, output)
        assert not missing, f"not printed: {missing[0]!r}\n{shown}"
    return ran


MARK = "@@docs-commands"


def _in_one_shell(
    page: list[Command], cwd: Path, timeout: float, inside: Sequence[str]
) -> list[tuple[Command, subprocess.CompletedProcess[str]]]:
    """Every command of the page in one bash started by ``inside``, each in a subshell of its
    own; a line on both streams before each command and its exit code after it split what each
    printed (a ``cd`` line moves the shell itself)."""
    script = []
    for i, command in enumerate(page):
        if shlex.split(command.line)[0] == "cd":
            script.append(command.line)
            continue
        script.append(f"printf '\\n{MARK} {i}\\n'; printf '\\n{MARK} {i}\\n' >&2")
        script.append(f"( {command.line}\n) < /dev/null; printf '\\n{MARK} {i} exit %d\\n' $?")
    done = subprocess.run(
        [*inside, "bash", "-c", "\n".join(script)],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    outs, errs, codes = _split(done.stdout), _split(done.stderr), {}
    for i, lines in outs.items():
        ends = [at for at, line in enumerate(lines) if line.startswith(f"{MARK} {i} exit ")]
        if ends:
            codes[i] = int(lines[ends[-1]].rsplit(" ", 1)[1])
            del lines[ends[-1] :]
    ran = []
    for i, command in enumerate(page):
        if shlex.split(command.line)[0] == "cd":
            continue
        shown = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert i in codes, (
            f"$ {command.line}: never ran to its end (the shell exited {done.returncode})\n{shown}"
        )
        stdout, stderr = (
            "".join(f"{line}\n" for line in outs[i]),
            "".join(f"{line}\n" for line in errs.get(i, [])),
        )
        ran.append((command, subprocess.CompletedProcess(command.line, codes[i], stdout, stderr)))
    return ran


def _split(stream: str) -> dict[int, list[str]]:
    """A stream's lines after each command's mark, by the command's index."""
    parts: dict[int, list[str]] = {}
    at = None
    for line in stream.splitlines():
        if line.startswith(f"{MARK} ") and line[len(MARK) + 1 :].isdigit():
            at = int(line[len(MARK) + 1 :])
            parts[at] = []
        elif at is not None:
            parts[at].append(line)
    return parts
