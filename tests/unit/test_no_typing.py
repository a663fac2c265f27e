"""The seccomp program that keeps a confined optimizer from typing into the user's terminal, run
on a small interpreter of the four instructions it uses: every way this machine's processes call
ioctl is caught, and nothing else is."""

from __future__ import annotations

import struct

import pytest

from pytest_capevolve._confine.launch import _ALLOW, _EPERM, _IOCTL, no_typing_program

TIOCSTI = 0x5412


def _run(program: list[tuple[int, int, int, int]], nr: int, arch: int, command: int) -> int:
    # struct seccomp_data: nr, arch, instruction_pointer, args[6] (little-endian)
    data = struct.pack("<iIQ6Q", nr, arch, 0, 3, command, 0, 0, 0, 0)
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unknown instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(_IOCTL))
def test_every_ioctl_of_the_machine_is_refused_tiocsti_and_nothing_else(machine: str) -> None:
    program = no_typing_program(machine, TIOCSTI)
    ioctls = [(arch, nr) for arch, numbers in _IOCTL[machine] for nr in numbers]
    for arch, nr in ioctls:  # x32's (x86_64's arch, a second number) too: it once fell to ALLOW
        assert _run(program, nr, arch, TIOCSTI) == _EPERM, (hex(arch), hex(nr))
        assert _run(program, nr, arch, TIOCSTI | (1 << 32)) == _EPERM  # the kernel reads 32 bits
        assert _run(program, nr, arch, 0x5401) == _ALLOW  # TCGETS: a terminal still works
    arches = {arch for arch, _ in ioctls}
    for arch in arches:
        assert _run(program, 1, arch, TIOCSTI) == _ALLOW  # another call with the same argument
    assert _run(program, ioctls[0][1], 0xDEADBEEF, TIOCSTI) == _ALLOW  # an arch not of this machine


def test_a_machine_whose_calls_are_not_known_gets_no_filter() -> None:
    assert no_typing_program("riscv64", TIOCSTI) == []
