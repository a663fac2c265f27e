"""The progress line of a long session: rollouts done of owed, $ spent, budget left.

Controller only, every ``--capevolve-progress`` seconds (default 30)."""

from __future__ import annotations

import time
from typing import Any

from .._policy.budget.spend import Ceilings
from .._policy.stop.stop_condition import parse as parse_stop_condition
from .._project.spec import Spec
from .._store.rollouts.record import record_from_report
from .._store.rundir import RunDir


class Progress:
    def __init__(self, spec: Spec, rundir: RunDir, owed: int, interval_s: float | None) -> None:
        spent = rundir.state.read_state()["spent"]  # the run's spend when the session started
        self.run_usd = float(spent.get("usd", 0.0)) + float(spent.get("optimizer_usd", 0.0))
        self.run_calls = int(spent.get("metric_calls", 0))
        self.ceilings = Ceilings.from_spec(spec, parse_stop_condition(spec.stop_condition))
        self.owed = owed
        self.interval_s = interval_s
        self.done = 0
        self.usd = 0.0
        self._last = time.monotonic()

    def reported(self, report: Any) -> str | None:
        """Count one report; the progress line when ``interval_s`` has passed since the last."""
        record = record_from_report(report)
        if record is None:
            return None
        self.done += 1
        self.usd += record.cost_usd
        now = time.monotonic()
        if self.done == 1 and self.interval_s:  # the clock starts with the first rollout,
            self._last = now  # not with the workers' start-up
            return None
        if self.interval_s is None or now - self._last < self.interval_s:
            return None
        self._last = now
        return self.line()

    def line(self) -> str:
        share = f" ({self.done / self.owed:.0%})" if self.owed else ""
        text = (
            f"capevolve progress: {self.done}/{self.owed} rollouts{share}, ${self.usd:.4f} spent "
            f"this session (run: ${self.run_usd + self.usd:.4f})"
        )
        left = []
        if self.ceilings.max_usd is not None:
            usd_left = self.ceilings.max_usd - self.run_usd - self.usd
            left.append(f"${usd_left:.4f} of {self.ceilings.named('max_usd')}")
        if self.ceilings.max_metric_calls is not None:
            calls_left = self.ceilings.max_metric_calls - self.run_calls - self.done
            left.append(f"{calls_left:g} rollouts of {self.ceilings.named('max_metric_calls')}")
        return f"{text}; budget left: {', '.join(left)}" if left else f"{text}; no budget ceiling set"
