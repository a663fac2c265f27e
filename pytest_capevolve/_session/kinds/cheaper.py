"""Planning for the two cheaper-evidence kinds, a subset screen and a grow: the same project and run locks
as a gate session, and the same cleanup when planning refuses. Controller only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pytest

from ..._store.rundir import RunDir

if TYPE_CHECKING:
    from ..._project.spec import Spec
    from ..refusals import Screens

P = TypeVar("P")


def plan_locked(
    config: pytest.Config, spec: Spec, plan: Callable[[RunDir, Screens], P]
) -> tuple[P, RunDir, Screens]:
    """Run ``plan`` under the project's and run's locks; a refused plan releases its claims and leaves no
    run."""
    from ..refusals import Screens

    option = config.option
    with RunDir.project_lock(spec.project_dir):
        rundir = RunDir.resolve(spec.project_dir, option.capevolve_run_id, option.capevolve_new_run)
        screens = Screens(spec, rundir, microcases=True)
        config.add_cleanup(screens.close)  # its microcase checks' sandbox children
        try:
            with rundir.lock():
                planned = plan(rundir, screens)
        except BaseException:
            rundir.claims.release()
            rundir.discard_if_created()
            raise
    return planned, rundir, screens
