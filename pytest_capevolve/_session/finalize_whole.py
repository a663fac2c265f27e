"""A finalize scores the whole test plan or nothing: no pytest selection narrows it.

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


def selection_asked(config: pytest.Config) -> list[str]:
    """The options and arguments of this session that run less than every collected item."""
    option = config.option
    asked = []
    if getattr(option, "keyword", ""):
        asked.append(f"-k {option.keyword!r}")
    if getattr(option, "markexpr", ""):
        asked.append(f"-m {option.markexpr!r}")
    asked += [f"--deselect {node!r}" for node in getattr(option, "deselect", None) or []]
    asked += [f"node id {arg!r}" for arg in config.args if "::" in str(arg)]
    for flag, name in (("lf", "--last-failed"), ("stepwise", "--stepwise"), ("maxfail", "--maxfail")):
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
