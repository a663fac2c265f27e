"""Wiring for the two cheaper-evidence sessions: a subset screen and a grow.

Called from :func:`.wiring.configure` on the controller: checks the flags (``--capevolve-screen``
/ ``--capevolve-screen-ids`` / ``--capevolve-grow``), plans under the same project and run locks
as a gate session, and builds the role that concludes the session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .._project.spec import Spec
from .._store.rundir import RunDir
from .persistence import Persistence
from .planning import CandidateRequest, Planned
from .refusals import Screens

if TYPE_CHECKING:  # imported by a screen or grow session only (an evaluation does not load them)
    from .grow import GrowPlanned, GrowSession
    from .subset_screen import ScreenPlanned, ScreenSession

COMMIT_MODES = ("auto", "none")


def screen_or_grow(config: pytest.Config, split: str) -> str | None:
    """``screen`` or ``grow`` when one was asked for (checked here, before any planning)."""
    option = config.option
    screen = option.capevolve_screen is not None or option.capevolve_screen_ids is not None
    if not screen and not option.capevolve_grow:
        return None
    kind = "grow" if option.capevolve_grow else "screen"
    flag = "--capevolve-grow" if kind == "grow" else "--capevolve-screen"
    if screen and option.capevolve_grow:
        raise pytest.UsageError("--capevolve-screen and --capevolve-grow are separate sessions; run one")
    if option.capevolve_screen is not None and option.capevolve_screen_ids is not None:
        raise pytest.UsageError("give --capevolve-screen TIER or --capevolve-screen-ids a,b,c, not both")
    if len(option.capevolve_candidate) != 1:
        raise pytest.UsageError(f"{flag} takes exactly one --capevolve-candidate")
    for name in ("gate", "rerun", "block"):
        if getattr(option, f"capevolve_{name}"):
            raise pytest.UsageError(f"--capevolve-{name} does not apply to {flag}")
    if split != "val":
        raise pytest.UsageError(f"{flag} with --capevolve-split {split}: screens and grows read only val")
    return kind


def start_screen_or_grow(
    config: pytest.Config, spec: Spec, pool_ids: list[str], kind: str, candidate: CandidateRequest | None
) -> tuple[ScreenSession | GrowSession, Planned, Persistence, RunDir]:
    """Plan and build the role of a screen or grow session (under the same locks as a gate)."""
    from .grow import GrowPlanned, GrowSession, plan_grow
    from .subset_screen import ScreenRequest, ScreenSession, plan_screen

    option = config.option
    commit = option.capevolve_commit or config.getini("capevolve_commit") or "auto"
    if commit not in COMMIT_MODES:
        raise pytest.UsageError(
            f"--capevolve-commit must be one of {', '.join(COMMIT_MODES)}, got {commit!r}"
        )
    with RunDir.project_lock(spec.project_dir):
        rundir = RunDir.resolve(spec.project_dir, option.capevolve_run_id, option.capevolve_new_run)
        screens = Screens(spec, rundir, microcases=True)
        try:
            with rundir.lock():
                planned: ScreenPlanned | GrowPlanned
                if kind == "grow":
                    planned = plan_grow(spec, rundir, pool_ids, option.capevolve_candidate[0])
                else:
                    request = ScreenRequest(option.capevolve_screen, tuple(option.capevolve_screen_ids or ()))
                    assert candidate is not None
                    planned = plan_screen(spec, rundir, pool_ids, candidate, request, screens)
        except BaseException:
            rundir.claims.release()
            rundir.discard_if_created()
            raise
    persistence = Persistence(config, spec, rundir, planned.plan, waiting_on=planned.waiting_on)
    role: ScreenSession | GrowSession
    if isinstance(planned, GrowPlanned):
        veto = bool(option.capevolve_veto_regressions)
        role = GrowSession(spec, rundir, planned, persistence, commit, veto)
    else:
        role = ScreenSession(spec, rundir, planned, screens.refusals, persistence, commit)
    return role, planned, persistence, rundir
