"""The terminal reporter role: a line per failed rollout, a progress line, the capevolve tables, INFRA.

Controller only; it reads the session's outcome and tally and cannot change them. A task the agent fails is
data, not a bug: its report stays ``failed`` (counts and exit status see it) but leaves pytest's FAILURES
and short summary for one whole line here (split, task, tag, trial, feedback); any other failure keeps
pytest's."""

from __future__ import annotations

import re
import time
import weakref
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

from .._engine import confinement
from .._engine.candidate_bytes import STALE_COPY_FIX
from .._items.nodes import INFRA_PREFIX
from .._policy.stop.afford import Ceilings
from .._policy.stop.stop_condition import parse as parse_stop_condition
from .._project.spec import Spec
from .._show.numbers import num
from .._show.report import ARMS_LEGEND, VERDICTS_LEGEND, render_arms, render_verdicts
from .._store.rollouts.record import RolloutRecord, record_from_report
from .._store.rundir import RunDir
from .outcome import SessionEnd
from .persistence import Tally


def rollout_id(record: RolloutRecord) -> str:
    """``val::a12[improved-t3]``: the short id a person can act on (split, task, tag, trial)."""
    return f"{record.split}::{record.task_id}[{record.tag}-t{record.trial}]"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def is_refused_rollout(report: Any) -> bool:
    """A rollout refused before it ran (a stale copy's candidate): grouped in the summary, not in FAILURES."""
    return record_from_report(report) is None and str(report.longrepr or "").startswith(INFRA_PREFIX)


def grouped(entries: list[tuple[str, str]], limit: int = 20) -> list[tuple[str, str]]:
    """(name, reason) per distinct reason, "and N more" when several share it."""
    by_reason: dict[str, list[str]] = {}
    for nodeid, reason in entries:
        by_reason.setdefault(one_line(reason), []).append(nodeid.split("::", 1)[-1])
    shown = [
        (ids[0] + (f" and {len(ids) - 1} more with the same reason" if len(ids) > 1 else ""), reason)
        for reason, ids in list(by_reason.items())[:limit]
    ]
    if len(by_reason) > limit:
        shown.append((f"… and {len(by_reason) - limit} more reasons", ""))
    return shown


def failed_rollout_line(record: RolloutRecord, nodeid: str | None = None, *, feedback: bool = True) -> str:
    """``FAILED capevolve.yaml::val::a12[improved-t3] reward 0: ticket escalated …`` (never cut short);
    ``feedback=False`` (``--tb=no``): id and reward only."""
    line = f"FAILED {nodeid or rollout_id(record)} reward {num(record.reward, '.4g')}"
    said = one_line(record.feedback or "") if feedback else ""
    return f"{line}: {said}" if said else line


# --capevolve-failures: which failed rollouts get their own line. ``auto`` lists every one of a
# small session and one per task of a large one (a gate session of 40 tasks × 5 trials × 4
# tags fails hundreds of rollouts: a line each buries the verdicts)
FAILURE_POLICIES = ("all", "auto", "none")
AUTO_ALL_UP_TO = 20


def parse_failures(text: str) -> str | int:
    """``all`` | ``auto`` | ``none`` | N (at most N lines per task); ValueError otherwise."""
    word = str(text).strip().lower()
    if word in FAILURE_POLICIES:
        return word
    if word.isdigit() and int(word) >= 1:
        return int(word)
    raise ValueError(f"--capevolve-failures takes all, auto, none or a count per task ≥ 1, got {text!r}")


def listed_failures(records: list[RolloutRecord], policy: str | int) -> list[RolloutRecord]:
    if policy == "none":
        return []
    if policy == "all" or (policy == "auto" and len(records) <= AUTO_ALL_UP_TO):
        return list(records)
    per_task = 1 if policy == "auto" else int(policy)
    seen: Counter[tuple[str, str]] = Counter()
    listed = []
    for record in records:
        seen[record.split, record.task_id] += 1
        if seen[record.split, record.task_id] <= per_task:
            listed.append(record)
    return listed


def is_task_failure(report: Any) -> bool:
    if report.when != "call" or not report.failed:
        return False
    record = record_from_report(report)
    return record is not None and record.valid and record.infra_error is None


class Progress:
    """The progress line of a long session: rollouts done of owed, $ spent, budget left (every
    ``--capevolve-progress`` seconds, default 30)."""

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


@dataclass(eq=False)  # a plugin: identity, not value, equality
class CapevolveReporter:
    rundir: RunDir
    end: SessionEnd
    tally: Tally
    progress: Progress | None
    completing: Callable[[], str]  # the command that pays the missing rollouts (pinned, nothing deselected)
    failures: str | int = "auto"  # --capevolve-failures
    failed: list[RolloutRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # lines about the selection asked (:mod:`.selection`)
    deselected: set[Any] = field(default_factory=set)  # keys of the rollouts -k, -m or --deselect left out
    deselected_by: list[str] = field(default_factory=list)  # what deselects (:func:`.selection.deselecting`)
    # each failed rollout's node id and captured output (pytest's report sections, for ``-rA``)
    failed_at: dict[tuple[str, str, str, int], tuple[str, list[tuple[str, str]]]] = field(
        default_factory=dict
    )
    infra_sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # nodeid → the same
    _terminal: Any = field(default=None, init=False)
    _hidden: list[pytest.TestReport] | None = field(default=None, init=False)  # the agent's failures
    # the reports told task failures as they arrived: the summary hides them by this mark
    # instead of decoding 60,000 records again (twice) when it ends
    _task_failures: weakref.WeakSet[pytest.TestReport] = field(default_factory=weakref.WeakSet, init=False)

    def pytest_deselected(self, items: list[Any]) -> None:
        self.deselected.update(key for item in items if (key := getattr(item, "key", None)) is not None)

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """Show an infra error as its own outcome ("I"/INFRA), never as a task failure."""
        if report.when == "call" and report.failed:
            record = record_from_report(report)
            if record is not None and record.infra_error:
                return "infra", "I", ("INFRA", {"yellow": True})
        return None

    @pytest.hookimpl(trylast=True)  # after the terminal's header, and shown under -q as well
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        line = confinement.start_line()  # a machine without Landlock: one line, never a failure
        if line and self._terminal is not None:
            self._terminal.write_line(line, yellow=True)

    @pytest.hookimpl(trylast=True)  # after pytest's own letter for this report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if is_task_failure(report):
            self._task_failures.add(report)
            record = record_from_report(report)
            assert record is not None
            self.failed.append(record)
            key = (record.tag, record.split, record.task_id, record.trial)
            self.failed_at[key] = (report.nodeid, list(report.sections))
        elif report.when == "call" and report.failed and report.sections:
            record = record_from_report(report)
            if record is not None and record.infra_error:  # an adapter's error: what it printed helps most
                self.infra_sections[report.nodeid] = list(report.sections)
        if self.progress is not None and report.when == "call":
            line = self.progress.reported(report)
            if line is not None and self._terminal is not None:
                writer = getattr(self._terminal, "_tw", None)  # mid-way through a line of dots?
                if getattr(writer, "width_of_current_line", 0):
                    self._terminal.write("\n")
                self._terminal.write_line(line)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None]:
        """Around pytest's own summary: the agent's failed rollouts left out of FAILURES and the short
        summary (the summaries between, ``--durations``, see every report), then ours."""
        self._hide(terminalreporter.stats)
        try:
            return (yield)
        finally:
            self._unhide(terminalreporter.stats)
            try:
                self._print_summary(terminalreporter)
            except Exception as exc:  # a summary must never break the session's outcome
                terminalreporter.write_line(f"capevolve: could not print the summary: {exc!r}")

    @pytest.hookimpl(tryfirst=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_sees_all(self, terminalreporter: Any) -> None:
        # (named pytest_…: pytest reads no other name as a hook) the plain implementations run
        # after every wrapper's first half, before any second
        self._unhide(terminalreporter.stats)

    @pytest.hookimpl(trylast=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_hides_again(self, terminalreporter: Any) -> None:
        self._hide(terminalreporter.stats)

    def _hide(self, stats: dict[str, list[Any]]) -> None:
        reports = stats.get("failed", [])
        marked = self._task_failures
        bugs = [
            r for r in reports if r not in marked and not is_task_failure(r) and not is_refused_rollout(r)
        ]
        if len(bugs) == len(reports):
            return
        self._hidden = reports
        stats["failed"] = bugs
        if not bugs:
            del stats["failed"]

    def _unhide(self, stats: dict[str, list[Any]]) -> None:
        if self._hidden is not None:
            stats["failed"] = self._hidden
            self._hidden = None

    def _print_failed(self, tr: Any) -> None:
        if not self.failed:
            return
        tr.section(f"capevolve: {rollouts(len(self.failed), 'failed')} (the agent's, not a bug)", sep="-")
        order = {row.tag: i for i, row in enumerate(self.end.outcome.rows)}  # the plan's, not arrival's

        def key(r: RolloutRecord) -> tuple[int, str, str, str, int]:
            return (order.get(r.tag, len(order)), r.tag, r.split, r.task_id, r.trial)

        with_output = "A" in (tr.config.option.reportchars or "")  # -rA: what each one printed too
        feedback = getattr(tr.config.option, "tbstyle", "auto") != "no"  # --tb=no: id and reward only
        ordered = sorted(self.failed, key=key)
        listed = listed_failures(ordered, self.failures)
        for record in listed:
            nodeid, sections = self.failed_at[(record.tag, record.split, record.task_id, record.trial)]
            tr.write_line(failed_rollout_line(record, nodeid, feedback=feedback))
            if with_output:
                _write_sections(tr, sections)
        if len(listed) < len(ordered):
            per_task = 1 if self.failures == "auto" else self.failures
            how = "none listed" if self.failures == "none" else f"at most {per_task} per task listed"
            tr.write_line(
                f"… {len(ordered) - len(listed)} more failed rollouts not listed ({how}; "
                "--capevolve-failures all lists every one, or N at most N per task)"
            )

    def _print_judge_noise(self, tr: Any, outcome: Any) -> None:
        for verdict in outcome.verdicts:
            split = (self.rundir.verdicts.verdict(verdict.tag) or {}).get("judge_noise")
            if isinstance(split, dict) and "refused" in split:
                tr.write_line(f"{verdict.tag}: judge noise refused: {split['refused']}", yellow=True)
            elif isinstance(split, dict):
                tr.write_line(
                    f"{verdict.tag}: Var(Δ̄) is {split['judge_share']:.0%} the judge's, "
                    f"{split['agent_share']:.0%} the agent's ({split['rescores']} re-scores); "
                    f"within a task {split.get('within_task_judge_share', 0.0):.0%} the judge's: "
                    f"{split['advice']}"
                )

    def _print_summary(self, tr: Any) -> None:
        outcome, tally = self.end.outcome, self.tally
        self._print_failed(tr)
        for note in self.notes:
            tr.write_line(f"capevolve: {note}", yellow=True)
        for notice in self.rundir.notices:
            tr.write_line(f"capevolve: {notice}", yellow=True)
        if outcome.damaged:  # the run dir could not be written: that line, and nothing read from it
            for line, markup in outcome.closing:
                tr.write_line(line, **markup)
            return
        if not outcome.rows and not outcome.verdicts:
            return
        tr.section(f"capevolve run {self.rundir.run_id}", sep="=")
        for line in render_arms(outcome.rows) if outcome.rows else []:  # none: every candidate refused
            tr.write_line(line)
        if outcome.rows:
            tr.write_line(ARMS_LEGEND)
        if outcome.verdicts:
            self._print_verdicts(tr, outcome)
            self._print_judge_noise(tr, outcome)
        paid = sum(r.paid for r in outcome.rows)
        reused = sum(r.reused for r in outcome.rows)
        tr.write_line(f"rollouts: {paid} paid, {reused} reused; run dir: {self.rundir.root}")
        # pytest says only "no tests ran" (a node id, --lf and --ff have lines of their own)
        by_expression = [
            asked for asked in self.deselected_by if asked.startswith(("-k ", "-m ", "--deselect "))
        ]
        if not paid and by_expression and not outcome.missing:
            tr.write_line(
                self._nothing_owed_line(by_expression, sorted({r.tag for r in outcome.rows})), yellow=True
            )
        tr.write_line(f"candidate code: {confinement.candidate_code()}; optimizer: {confinement.optimizer()}")
        if outcome.report_error:
            tr.write_line(f"capevolve: {outcome.report_error}", yellow=True)
        if tally.infra:
            self._print_infra(tr)
        for worker, error in tally.dead_workers:
            tr.write_line(f"worker {worker} died ({error}); its rollouts are missing", red=True)
        if tally.over_budget:
            tr.write_line(
                f"{len(tally.over_budget)} rollouts not started: they would cross max_usd (each "
                f"process reserves a rollout's cost before it starts it){tally.over_budget[-1]}",
                yellow=True,
            )
        for name, reason in grouped(tally.lost):
            tr.write_line(f"no rollout from {name}: {reason}" if reason else name, red=True)
        if outcome.missing:
            for line in self._missing_lines(outcome.missing):
                tr.write_line(line, yellow=True)
        for line, markup in outcome.closing:
            tr.write_line(line, **markup)

    def _nothing_owed_line(self, by: list[str], tags: list[str]) -> str:
        """``-k``, ``-m`` or ``--deselect`` in a run that owes nothing: what it ran, and why."""
        from .._project.way_on import diagnose_commands

        diagnose = diagnose_commands(tags, self.rundir.project_dir, "--table", most=3)
        return (
            f"capevolve: {', '.join(by)} selected no rollout the run owes: every one is "
            f"recorded, and a recorded rollout is never drawn again; {diagnose} shows what they did and why"
        )

    def _print_verdicts(self, tr: Any, outcome: Any) -> None:
        """The nulls' noise floor, one line per verdict, its warnings and the explanation."""
        tr.section(f"capevolve verdicts vs {outcome.against} (val)", sep="-")
        if outcome.nulls:
            spread = max((abs(v.delta_mean) for v in outcome.nulls if v.delta_mean is not None), default=0.0)
            shown = ", ".join(f"{v.tag} Δ̄ {num(v.delta_mean, '+.4f')}" for v in outcome.nulls)
            judged = any(v.mode == "pairwise" for v in outcome.verdicts)  # the sign test is its own null
            floor = (
                " (no bar under gate_mode pairwise: the judge's sign test is its own null)" if judged else ""
            )
            tr.write_line(f"noise floor from null controls: {shown}; spread {spread:.4f}{floor}")
        for line in render_verdicts(outcome.verdicts, outcome.against):
            tr.write_line(line)
        tr.write_line(VERDICTS_LEGEND.format(against=f"'{outcome.against}'"))
        for verdict in outcome.verdicts:
            for warning in verdict.warnings:
                tr.write_line(f"{verdict.tag}: {warning}", red=True)
        for line in outcome.explained:
            tr.write_line(line)

    def _print_infra(self, tr: Any) -> None:
        """Infra errors, grouped (missing data, never a 0); with -rA what each printed."""
        infra = self.tally.infra
        tr.write_line(f"infra errors ({len(infra)}; missing data, never a 0):")
        for name, reason in grouped(infra):
            tr.write_line(f"  INFRA {name}: {reason}" if reason else f"  {name}")
        if "A" in (tr.config.option.reportchars or ""):  # -rA: what each one printed and logged
            for nodeid, sections in self.infra_sections.items():
                tr.write_line(f"INFRA {nodeid.split('::', 1)[-1]}")
                _write_sections(tr, sections)

    def _missing_lines(self, keys: list[Any]) -> list[str]:
        """How many rollouts are missing and the command that pays only those."""
        recopy = any(STALE_COPY_FIX in reason for _nodeid, reason in self.tally.infra + self.tally.lost)
        then = "copy the project to the workers again, then " if recopy else ""
        if self.tally.infra and not recopy:  # the same command pays the same error until its cause goes
            then = "once the cause of the infra errors above is fixed (a passing outage: now), "
        missing, left_out = len(keys), sum(key in self.deselected for key in keys)
        by = f" by {', '.join(self.deselected_by[:3])}" if self.deselected_by else ""
        deselected = f" ({left_out} deselected{by})" if left_out else ""
        command = self.completing()
        lines = [f"{are_missing(missing)}{deselected}; {then}to complete only those, run:", f"  {command}"]
        new_run = re.sub(r" --capevolve-run-id[= ]\S+", " --capevolve-new-run", command)
        if self.tally.infra and not recopy and new_run != command:
            # an adapter or scorer that raised is mended in the harness, which this run refuses
            lines.append(
                f"when the fix is to the adapter or its scorer (harness), measure it in a new run: {new_run}"
            )
        return lines


def _write_sections(tr: Any, sections: list[tuple[str, str]]) -> None:
    """What a rollout printed and logged (pytest's report sections), for ``-rA``."""
    for title, content in sections:
        tr.write_sep("-", title)
        tr.line(content.rstrip("\n"))


def rollouts(count: int, adjective: str = "") -> str:
    words = [str(count), *([adjective] if adjective else []), "rollout" if count == 1 else "rollouts"]
    return " ".join(words)


def are_missing(count: int) -> str:
    return f"{rollouts(count)} {'is' if count == 1 else 'are'} missing"
