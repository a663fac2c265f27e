"""The terminal reporter role: the capevolve tables at the end of a session, and INFRA.

Controller only (pytest-xdist keeps its ``TerminalDistReporter`` apart from ``DSession`` the
same way). It reads the session's outcome and tally; nothing it prints can change them, and a
formatting error never breaks the session's outcome.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..show.numbers import num
from ..show.report import render_arms, render_verdicts
from ..store.rundir import RunDir
from .outcome import SessionEnd
from .persistence import Tally, infra_error_of


class CapevolveReporter:
    def __init__(self, rundir: RunDir, end: SessionEnd, tally: Tally) -> None:
        self.rundir = rundir
        self.end = end
        self.tally = tally

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """Show an infra error as its own outcome ("I"/INFRA), never as a task failure."""
        if report.when == "call" and report.failed:
            if infra_error_of(report):
                return "infra", "I", ("INFRA", {"yellow": True})
        return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        try:
            self._print_summary(terminalreporter)
        except Exception as exc:  # a summary must never break the session's outcome
            terminalreporter.write_line(f"capevolve: could not print the summary: {exc!r}")

    def _print_summary(self, tr: Any) -> None:
        outcome, tally = self.end.outcome, self.tally
        for notice in self.rundir.notices:
            tr.write_line(f"capevolve: {notice}", yellow=True)
        if not outcome.rows:
            return
        tr.section(f"capevolve run {self.rundir.run_id}", sep="=")
        for line in render_arms(outcome.rows):
            tr.write_line(line)
        if outcome.verdicts:
            tr.section(f"capevolve verdicts vs {outcome.against} (val)", sep="-")
            if outcome.nulls:
                spread = max(
                    (abs(v.delta_mean) for v in outcome.nulls if v.delta_mean is not None), default=0.0
                )
                shown = ", ".join(f"{v.tag} Δ̄ {num(v.delta_mean, '+.4f')}" for v in outcome.nulls)
                tr.write_line(f"noise floor from null controls: {shown}; spread {spread:.4f}")
            for line in render_verdicts(outcome.verdicts):
                tr.write_line(line)
            for verdict in outcome.verdicts:
                for warning in verdict.warnings:
                    tr.write_line(f"{verdict.tag}: {warning}", red=True)
        paid = sum(r.paid for r in outcome.rows)
        reused = sum(r.reused for r in outcome.rows)
        tr.write_line(f"rollouts: {paid} paid, {reused} reused; run dir: {self.rundir.root}")
        if outcome.report_error:
            tr.write_line(f"capevolve: {outcome.report_error}", yellow=True)
        if tally.infra:
            tr.write_line(f"infra errors ({len(tally.infra)}; missing data, never a 0):")
            for nodeid, reason in tally.infra[:20]:
                tr.write_line(f"  {nodeid}: {reason}")
        for worker, error in tally.dead_workers:
            tr.write_line(f"worker {worker} died ({error}); its rollouts are missing", red=True)
        for nodeid, reason in tally.lost[:20]:
            tr.write_line(f"no rollout from {nodeid}: {reason}", red=True)
        if outcome.missing:
            missing = len(outcome.missing)
            tr.write_line(
                f"{missing} rollouts are missing; re-run the same command to complete only those", yellow=True
            )
        for line, markup in outcome.closing:
            tr.write_line(line, **markup)
