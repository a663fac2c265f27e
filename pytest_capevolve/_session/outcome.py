"""A session's conclusion: the outcome its roles share, and the role that reaches it.

Controller only. :class:`SessionEnd` runs the kind's ``conclude`` after pytest's run loop (the last moment
the exit status can change) and applies the exit status; the reporter reads the outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .. import exitcodes
from .._items.plan import RolloutKey
from .._show.report import TagRow
from .._store.files import collection_paused
from .._store.log.paid_by import UntrustedRecord
from .selection import stopped_early, stopped_line

if TYPE_CHECKING:
    from .._project.spec import Spec
    from .._store.rundir import RunDir


@dataclass
class Outcome:
    rows: list[TagRow] = field(default_factory=list)
    missing: list[RolloutKey] = field(default_factory=list)
    verdicts: list[Any] = field(default_factory=list)
    nulls: list[Any] = field(default_factory=list)  # the null controls' verdicts (the noise floor)
    against: str = ""
    exit_code: int | None = None
    report_error: str | None = None
    closing: list[tuple[str, dict[str, bool]]] = field(default_factory=list)  # (line, markup)
    explained: list[str] = field(default_factory=list)  # --capevolve-explain: verdicts in words
    damaged: bool = False  # stopped because the run dir could not be written: exit 12 whatever stopped it

    def say(self, line: str, **markup: bool) -> None:
        """A closing line, coloured by ``markup`` (``yellow=True``)."""
        self.closing.append((line, markup))


@dataclass(eq=False)  # a plugin: identity, not value, equality
class SessionEnd:
    """On the controller; ``conclude`` is the session kind's (:class:`.kinds.base.Started`)."""

    conclude: Callable[[], Outcome]
    against: str
    settle: Callable[[], list[str]]  # release this session's claims, wait for concurrent sessions'
    interrupted: Callable[[], Outcome]  # after Ctrl-C: the table and the resume line
    damage: Callable[[], str | None]  # the line saying the run dir refused a write, if it did
    refusal: Callable[[], str | None]  # the collected items were not the plan (:mod:`.plan_check`)

    def __post_init__(self) -> None:
        self.outcome = Outcome(against=self.against)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        stopped_by = None
        try:
            result = yield
        except (session.Failed, KeyboardInterrupt) as exc:
            # -x, --maxfail or --sw stopped the loop at a rollout the agent failed: a task failed
            # is data, not a bug, so the session concludes on what ran, as after -k
            stopped_by = stopped_early(session.config, session, exc)
            if stopped_by is None:
                self._stopped(exc)
                raise
            result = True
        refused = self.refusal()
        if refused is not None:  # nothing ran: nothing is concluded, the line says why
            raise pytest.UsageError(refused)
        if not session.config.option.collectonly and not self._damaged():
            try:
                settled = self.settle()  # first: the claims released, concurrent sessions waited for
                with collection_paused():  # the run's rows again, read whole: no cycles
                    self.outcome = self.conclude()
            except OSError as exc:  # the run dir refused a write while concluding (a full disk)
                self.outcome = _damaged_outcome(
                    f"capevolve: the session could not write its conclusion: {exc}"
                )
                return result
            except UntrustedRecord as exc:  # rollouts no session paid: nothing is decided on them
                self.outcome = _damaged_outcome(f"capevolve: {exc}", exitcodes.INDECISIVE)
                return result
            self.outcome.closing[:0] = [(line, {}) for line in settled]
            if stopped_by is not None and self.outcome.missing:  # a stop with nothing owed stopped nothing
                self.outcome.say(stopped_line(stopped_by), yellow=True)
        return result

    def _stopped(self, exc: BaseException) -> None:
        """The run loop raised (Ctrl-C, or ``Failed`` on a session not ours). After Ctrl-C, unless the run
        dir refused a write: no verdicts (the evidence is partial), but the table and the resume line."""
        if not isinstance(exc, KeyboardInterrupt) or self._damaged():
            return
        try:
            self.outcome = self.interrupted()
        except Exception as error:  # the summary must never mask the interrupt
            self.outcome.say(f"capevolve: no summary after Ctrl-C: {error!r}")

    def _damaged(self) -> bool:
        """Whether the run dir refused a write during the loop: then that line, exit 12, nothing concluded."""
        line = self.damage()
        if line is None:
            return False
        self.settle()  # lets go of the claims, writes nothing
        self.outcome = _damaged_outcome(line)
        return True

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.outcome.exit_code is not None and (
            self.outcome.damaged or session.exitstatus in exitcodes.REPLACEABLE
        ):
            session.exitstatus = self.outcome.exit_code


def _damaged_outcome(line: str, exit_code: int = exitcodes.INFRA_FAILURE) -> Outcome:
    return Outcome(exit_code=exit_code, closing=[(line, {"red": True})], damaged=True)


@dataclass(frozen=True)
class SessionHooks:
    """The user's hooks as roles call them, right after the record changed (so a hook reads what is on
    disk)."""

    config: pytest.Config

    def write_verdict(self, rundir: RunDir, verdict: dict[str, Any], *, replacing: bool = False) -> Path:
        """Write a verdict file, then ``pytest_capevolve_verdict_written`` (``replacing``: a grow)."""
        path = rundir.verdicts.write_verdict(verdict, replacing=replacing)
        self.verdicts_written([(verdict, path)])
        return path

    def verdicts_written(self, files: list[tuple[dict[str, Any], Path]]) -> None:
        for verdict, path in files:
            self.config.hook.pytest_capevolve_verdict_written(config=self.config, verdict=verdict, path=path)

    def booked_line(
        self, spec: Spec, rundir: RunDir, tag: str, decision: str, basis: str | None, note: str, written: str
    ) -> str:
        """Book the decision (then ``pytest_capevolve_decision_booked``) and say so, or say why the commit
        path refused it (``written``: what stays)."""
        # here: the commit path is paid for only by sessions that book
        from .._policy.booking.commit import CommitRefused, book

        try:
            booked = book(spec, rundir, tag, decision, basis=basis, note=note)
            self.config.hook.pytest_capevolve_decision_booked(config=self.config, decision=booked)
        except CommitRefused as exc:
            return f"{tag}: {written} written, decision not booked: {exc}"
        return f"{tag}: booked {decision}" + (f" ({basis})" if basis else "")
