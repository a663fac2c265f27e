"""Start a command inside a boundary: ``python -m pytest_capevolve._confine.launch JSON -- CMD…``.

The launcher confines itself to the :class:`.landlock.Boundary` in ``JSON``, then ``exec``s the
command, which can never lift it. Without Landlock it says so on stderr and runs the command
unconfined (the caller labels the run).

Whether the optimizer was confined is said by the process that started it, never the optimizer:
``capevolve agent``'s broker or ``capevolve hill-climb`` passes it in :data:`OPTIMIZER_ENV` to the
commands it runs, and the record copies it. A confined agent cannot forge it, since the broker
builds each command's environment itself; a process of the same user outside the boundary can
(the threat model's broker section: not held)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from .landlock import Boundary, Confinement, confine

CONFINEMENT_ENV = "CAPEVOLVE_CONFINEMENT"  # what the started command finds: the label's JSON
OPTIMIZER_ENV = "CAPEVOLVE_OPTIMIZER_CONFINEMENT"


def environment(state: Confinement, by: str) -> dict[str, str]:
    """The variable a command run for the optimizer carries (set by its starter, ``by``)."""
    return {OPTIMIZER_ENV: json.dumps({**state.as_json(), "label": state.label, "by": by}, sort_keys=True)}


def optimizer_label() -> str | None:
    """The optimizer's label as its starter passed it; None when none did."""
    try:
        fields = json.loads(os.environ.get(OPTIMIZER_ENV, ""))
    except ValueError:
        return None
    label = fields.get("label") if isinstance(fields, dict) else None
    return label if isinstance(label, str) else None


def command(boundary: Boundary, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", __name__, json.dumps(boundary.as_json()), "--", *argv]


# each audit arch a process of this machine can call with, and ioctl's numbers under it (x32's calls
# come as x86_64's arch with bit 30 set in the number: one arch, two numbers)
_IOCTL = {
    "x86_64": ((0xC000003E, (16, 0x40000000 | 514)), (0x40000003, (54,))),  # x86_64 and x32, i386
    "aarch64": ((0xC00000B7, (29,)), (0x40000028, (54,))),  # arm64, arm
}
_LD, _JEQ, _RET = 0x20, 0x15, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
_ALLOW, _EPERM = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM


def no_typing_program(
    machine: str, tiocsti: int, little_endian: bool = True
) -> list[tuple[int, int, int, int]]:
    """The seccomp program (code, jt, jf, k) that answers ``ioctl(fd, TIOCSTI, …)`` with EPERM and
    allows every other call; empty where ``machine``'s calls are not known here."""
    groups = _IOCTL.get(machine, ())
    if not groups:
        return []
    allow = 1 + sum(2 + len(numbers) for _, numbers in groups)  # then: check the command
    program = [(_LD, 0, 0, 4)]  # the call's arch
    for arch, numbers in groups:
        # another arch: past this group (the arch still loaded); this one: one of its ioctls, or allowed
        program += [(_JEQ, 0, 1 + len(numbers), arch), (_LD, 0, 0, 0)]
        for k, number in enumerate(numbers):
            at = len(program)
            otherwise = allow - at - 1 if k == len(numbers) - 1 else 0
            program.append((_JEQ, allow + 1 - at - 1, otherwise, number))
    command_at = 24 if little_endian else 28  # the low half of the call's 2nd argument
    program += [(_RET, 0, 0, _ALLOW), (_LD, 0, 0, command_at), (_JEQ, 0, 1, tiocsti)]
    return [*program, (_RET, 0, 0, _EPERM), (_RET, 0, 0, _ALLOW)]


def no_typing() -> bool:
    """Refuse this process and all it starts ``TIOCSTI`` (EPERM): an agent that keeps the user's
    terminal could push a command into it for the shell to run, outside the boundary, once it
    exits; Landlock does not filter that ioctl. A seccomp filter, after ``no_new_privs`` (set by
    :func:`.landlock.confine`); False where this machine's calls are not known here."""
    import ctypes
    import termios

    program = no_typing_program(os.uname().machine, termios.TIOCSTI, sys.byteorder == "little")
    if not program:
        return False

    class Instruction(ctypes.Structure):
        _fields_ = [
            ("code", ctypes.c_uint16),
            ("jt", ctypes.c_uint8),
            ("jf", ctypes.c_uint8),
            ("k", ctypes.c_uint32),
        ]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    instructions = (Instruction * len(program))(*(Instruction(*i) for i in program))
    fprog = Program(len(program), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def confined(boundary: dict[str, Any] | None) -> Confinement:
    """This process confined to ``boundary`` (a :class:`Boundary`'s JSON), or why not: a kernel
    without Landlock, ``CAPEVOLVE_LANDLOCK=off``, or a rule the kernel refused — then the process
    runs unconfined and its rollouts say so, never a failure. Confined, it also refuses itself
    ``TIOCSTI`` (the launcher's seccomp filter): its session of its own leaves it no controlling
    terminal, but a process with CAP_SYS_ADMIN (root, as in many containers) may type into any
    terminal it opens by path."""
    if boundary is None:
        return Confinement(False, 0, "the scoring process gave no boundary")
    try:
        state = confine(Boundary.from_json(boundary))
    except (OSError, ValueError) as exc:  # nothing was applied: confine() restricts last
        return Confinement(False, 0, f"the kernel refused the boundary: {exc}")
    if state.confined:
        no_typing()
    return state


def main(args: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if args is None else args)
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: python -m pytest_capevolve._confine.launch BOUNDARY_JSON -- CMD [ARGS…]")
    boundary = Boundary.from_json(json.loads(args[0]))
    argv = args[2:]
    state = confine(boundary)
    if state.confined:
        no_typing()
    else:
        print(f"capevolve: running {argv[0]} {state.label}", file=sys.stderr)
    os.environ[CONFINEMENT_ENV] = json.dumps(state.as_json())
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.exit(f"capevolve: cannot start {argv[0]}: {exc.strerror}")


if __name__ == "__main__":
    main()
