"""A capevolve session started inside the optimizer's boundary: refused in one line.

Inside ``capevolve agent`` (or a hill-climb's optimizer) the record is out of reach, by the
kernel: a session there could neither read the run nor write it. So a session that sees
:data:`.._confine.launch.CONFINEMENT_ENV` at configure says so and names the command that works —
the same session through the broker, ``capevolve pytest ARGS`` — and exits 4 (usage). Where the
variable was dropped, the first write the kernel refuses (a ``PermissionError`` while the
session plans) gets the same line, with the file, instead of a traceback.
"""

from __future__ import annotations

import os
import shlex

import pytest

from .._confine.launch import CONFINEMENT_ENV


def brokered(config: pytest.Config) -> str:
    """This session's command line, as the broker takes it."""
    return shlex.join(["capevolve", "pytest", *map(str, config.invocation_params.args)])


def refuse_inside_boundary(config: pytest.Config) -> None:
    """Controller and workers alike, before anything is read: refuse a session started inside."""
    if CONFINEMENT_ENV in os.environ:
        raise pytest.UsageError(
            "this session runs inside the optimizer's boundary (capevolve agent), where the record "
            f"cannot be written; run it through the broker: {brokered(config)}"
        )


def refused_write(config: pytest.Config, exc: PermissionError) -> pytest.UsageError:
    """A write the kernel (or the file system) refused while the session planned."""
    where = f"{exc.filename}: " if exc.filename else ""
    return pytest.UsageError(
        f"this session cannot write the record ({where}{exc.strerror or exc}); inside capevolve "
        f"agent, run it through the broker: {brokered(config)}"
    )
