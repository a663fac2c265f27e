"""A capevolve session started inside the optimizer's boundary: refused in one line.

Inside ``capevolve agent`` the kernel keeps the record out of reach, so a session seeing
:data:`.._confine.launch.CONFINEMENT_ENV` names the command that works (``capevolve pytest ARGS``) and
exits 4; where the variable was dropped, the first refused write gets the same line."""

from __future__ import annotations

import os
import shlex

import pytest

from .._confine.launch import CONFINEMENT_ENV


def brokered(config: pytest.Config) -> str:
    return shlex.join(["capevolve", "pytest", *map(str, config.invocation_params.args)])


def refuse_inside_boundary(config: pytest.Config) -> None:
    if CONFINEMENT_ENV in os.environ:
        raise pytest.UsageError(
            "this session runs inside the optimizer's boundary (capevolve agent), where the record "
            f"cannot be written; run it through the broker: {brokered(config)}"
        )


def refused_write(config: pytest.Config, exc: PermissionError) -> pytest.UsageError:
    where = f"{exc.filename}: " if exc.filename else ""
    return pytest.UsageError(
        f"this session cannot write the record ({where}{exc.strerror or exc}); inside capevolve "
        f"agent, run it through the broker: {brokered(config)}"
    )
