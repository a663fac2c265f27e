"""A finalize scores the whole test plan or nothing, and a gate decides on its whole val plan.

Controller only, before the seal is claimed: a ``--deselect`` of one test rollout once left the seal unburned
after the test mean was on disk, so any pytest selection that would leave part of the plan unrun is
refused."""

from __future__ import annotations

import pytest

from .._project.splits import TestSealError


def selection_asked(config: pytest.Config, *, marks: bool = True) -> list[str]:
    """The options and arguments that run less than every collected item. ``marks``: ``-m`` too (left out,
    the plan check refuses it only if it deselects a rollout)."""
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
        ("lf", "--lf/--last-failed"),
        ("failedfirst", "--ff/--failed-first"),
        ("newfirst", "--new-first"),
        ("stepwise", "--stepwise"),
        ("maxfail", "-x/--maxfail"),
    ):
        if getattr(option, flag, None):
            asked.append(name)
    return asked


def refuse_partial(config: pytest.Config, run_id: str) -> None:
    asked = selection_asked(config) + ["--collect-only"] * config.option.collectonly  # (it names test ids)
    if asked:
        raise TestSealError(
            f"run {run_id}: a finalize runs the whole test plan, so {', '.join(asked[:3])} is refused "
            "before any test rollout (part of the test split, or its task ids, would show without "
            "burning the seal); run pytest --capevolve-finalize PROJECT with no selection"
        )


def refuse_selection(config: pytest.Config, session_kind: str) -> None:
    """A deciding session (gate, grow, screen) decides on its whole val plan (``-k "not n07"`` once dropped
    the task a candidate loses): a one-line UsageError before anything is paid."""
    asked = selection_asked(config, marks=False)  # rollouts carry no marks: -m drops none
    if asked:
        raise pytest.UsageError(
            f"capevolve: {session_kind} decides on the whole val set of its plan, so "
            f"{', '.join(asked[:3])} is refused before any rollout (a selection would choose which "
            "tasks it decides on); run it with no selection (a session that decides nothing may "
            "evaluate a subset)"
        )
