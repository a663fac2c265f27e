"""A finalize scores the whole test plan or nothing, and a gate decides on its whole val plan:
no pytest selection narrows either.

Controller only, before the seal is claimed. ``--deselect "capevolve.yaml::test::n03[seed-t0]"``
paid 239 of 240 test rollouts and left the seal unburned: the rewards in ``rollouts/test/``
gave the test mean, and gating was still open. Opening the test split in the log before the
first rollout (:meth:`.._store.seal.Seal.open`) closes gating; this refuses, in one line and
before any test rollout, the selections that would leave some of the plan unrun, so a
finalize is never a way to peek at part of the test split.
"""

from __future__ import annotations

import pytest

from .._project.splits import TestSealError


def selection_asked(config: pytest.Config, *, marks: bool = True) -> list[str]:
    """The options and arguments of this session that run less than every collected item.
    ``marks``: ``-m`` too (a project's ``addopts = -m "not slow"`` deselects no rollout; where
    it is left out here, the plan check refuses it only if it does deselect one)."""
    option = config.option
    asked = []
    if getattr(option, "keyword", ""):
        asked.append(f"-k {option.keyword!r}")
    markexpr: str = getattr(option, "markexpr", "")
    if marks and markexpr:
        asked.append(f"-m {markexpr!r}")
    asked += [f"--deselect {node!r}" for node in getattr(option, "deselect", None) or []]
    asked += [f"node id {arg!r}" for arg in config.args if "::" in str(arg)]
    for flag, name in (
        ("lf", "--last-failed"),
        ("failedfirst", "--failed-first"),
        ("newfirst", "--new-first"),
        ("stepwise", "--stepwise"),
        ("maxfail", "--maxfail"),
    ):
        if getattr(option, flag, None):
            asked.append(name)
    return asked


def refuse_partial(config: pytest.Config, run_id: str) -> None:
    """Raise TestSealError (one line) when this finalize would not run its whole test plan."""
    asked = selection_asked(config)
    if asked:
        raise TestSealError(
            f"run {run_id}: a finalize runs the whole test plan, so {', '.join(asked[:3])} is refused "
            "before any test rollout (part of the test split would show its mean without burning "
            "the seal); run pytest --capevolve-finalize PROJECT with no selection"
        )


def refuse_selection(config: pytest.Config, session_kind: str) -> None:
    """A session that decides (a gate, grow, a screen) decides on the whole val set of its plan:
    ``-k "not n07"`` left out the task a candidate loses and the gate decided on the rest above
    ``min_coverage``. Raise a one-line UsageError, before anything is claimed or paid, when this
    session would run less than its plan (or in another order); grow and the screens choose
    their subsets in their own planning, never through pytest's selection."""
    asked = selection_asked(config, marks=False)  # rollouts carry no marks: -m drops none
    if asked:
        raise pytest.UsageError(
            f"capevolve: {session_kind} decides on the whole val set of its plan, so "
            f"{', '.join(asked[:3])} is refused before any rollout (a selection would choose which "
            "tasks it decides on); run it with no selection (a session that decides nothing may "
            "evaluate a subset)"
        )
