"""Collectors and items: every owed rollout of the plan becomes one pytest item.

Collection runs wherever pytest collects (in-process, or on each xdist worker) and depends
only on the spec and the plan, so every worker collects the same items in the same order:
``capevolve.yaml::val::<task>[<tag>-t<k>]``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.structures import NodeKeywords
from _pytest.pathlib import absolutepath

from .._engine.budget_share import SKIP_REASON as BUDGET_SKIP
from .._engine.budget_share import BudgetShare
from .._engine.candidate_bytes import CandidateBytes, CandidateMismatch, Stamp
from .._engine.inflight import RolloutPool
from .._engine.rollout_output import OutputRouting
from .._engine.runner import AdapterRunner, Scored, charge, run_and_score
from .._engine.sandbox import Sandboxes
from .._engine.wire import plain
from .._project.adapter import Task
from .._project.spec import Spec
from .._store.rollouts.record import RECORD_PROPERTY, RolloutRecord, remember_decoded
from .._store.rundir import RUNS_DIR
from .._store.sessions import markers
from .._store.sessions.markers import ControllerWatch
from .plan import EvalPlan, RolloutKey

INFRA_PREFIX = "INFRA ERROR (missing data, not a reward of 0): "
SEQUENTIAL_SKIP = "sequential gate stopped"
CONTROLLER_STOPPED = "the session's controller stopped"


# Fields of a rollout item made on first use rather than carried by every item: pytest keeps every
# item to the session's end (60,000 at 10k tasks × 3 trials × 2 tags), each with ~0.9 KB of nearly
# always empty fields from ``Node.__init__``. :class:`MadeOnUse` makes such a field on first use,
# and :func:`shed` drops one that holds nothing.
class MadeOnUse:
    """A field made by ``make(item)`` when first read, then an ordinary instance attribute that
    shadows this non-data descriptor; :func:`shed` deletes it when ``blank``. Values are set with
    ``setattr``, never through ``__dict__``, which CPython would build for every item."""

    def __init__(
        self, make: Callable[[Any], Any], *, blank: Callable[[Any, Any], bool] | None = None
    ) -> None:
        self.make = make
        self.blank = blank
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, item: Any, owner: type | None = None) -> Any:
        if item is None:
            return self
        value = self.make(item)
        setattr(item, self.name, value)
        return value


def shed(item: Any) -> None:
    """Delete every :class:`MadeOnUse` field of ``item`` that is blank (one never made is made
    and dropped: cheaper than asking the instance ``__dict__``, see :class:`MadeOnUse`)."""
    for made in _sheddable(type(item)):  # type: ignore[arg-type]  # a class is hashable; the cache stub says Hashable
        if made.blank(item, getattr(item, made.name)):  # type: ignore[misc]
            delattr(item, made.name)


@functools.cache
def _sheddable(cls: type) -> list[MadeOnUse]:
    fields = {
        name: made
        for klass in cls.__mro__
        for name, made in vars(klass).items()
        if isinstance(made, MadeOnUse)
    }
    return [made for name, made in fields.items() if made.blank is not None and getattr(cls, name) is made]


def empty(item: Any, value: Any) -> bool:
    return type(value) in (list, set) and not value


def empty_stash(item: Any, value: Any) -> bool:
    return type(value) is pytest.Stash and not len(value)


def fresh_keywords(item: Any, value: Any) -> bool:
    """Only the item's own name, as ``NodeKeywords`` starts (no marker added since)."""
    return type(value) is NodeKeywords and value.parent is item.parent and value._markers == {item.name: True}


class LeanItem(pytest.Item):
    """A ``pytest.Item`` whose per-node containers are :class:`MadeOnUse` (see above). Subclasses
    call :func:`shed` when they are built and when they have run."""

    keywords = MadeOnUse(NodeKeywords, blank=fresh_keywords)
    own_markers = MadeOnUse(lambda item: [], blank=empty)
    extra_keyword_matches = MadeOnUse(lambda item: set(), blank=empty)
    stash = MadeOnUse(lambda item: pytest.Stash(), blank=empty_stash)
    # copied into each report as it is made: dropped once the item has run (captured output too)
    _report_sections = MadeOnUse(lambda item: [], blank=lambda item, value: True)
    user_properties = MadeOnUse(lambda item: [], blank=empty)
    # pytest's cached_property would build the instance __dict__; computed once all the same
    location = MadeOnUse(pytest.Item.location.func)  # type: ignore[attr-defined]

    @property
    def _store(self) -> pytest.Stash:
        """pytest's deprecated alias of ``stash``, kept an alias (``Node.__init__`` sets it)."""
        return self.stash

    @_store.setter
    def _store(self, value: pytest.Stash) -> None:
        pass


@dataclass
class EvalContext:
    """What items need to run, built once per process in ``pytest_configure``. ``inflight``: set
    when rollouts run off the main thread (K > 1, or an async adapter); items started ahead wait
    in ``started`` until pytest runs them, ``routing`` keeps what each prints for its item."""

    spec: Spec
    plan: EvalPlan
    runner: AdapterRunner
    pool: dict[str, Task]
    on_copy: bool = False  # a worker in another folder than the controller's: its own copy
    candidate_bytes: CandidateBytes = field(init=False)
    stamps: dict[str, Stamp] = field(default_factory=dict)  # a rollout in flight: its snapshot's stamp
    inflight: RolloutPool | None = None
    started: dict[str, Future[Scored]] = field(default_factory=dict)
    routing: OutputRouting | None = None
    # --capevolve-sequential: tags decided in this process (the controller's own items)
    stopped: set[str] = field(default_factory=set)
    # on an xdist worker: whether the controller that started it has stopped
    watch: ControllerWatch | None = None
    # on an xdist worker whose tasks() differs from the controller's: why nothing is run here
    pool_problem: str | None = None
    # this process's share of max_usd / max_metric_calls, reserved before each rollout starts
    budget: BudgetShare = field(default_factory=BudgetShare)
    # at concurrency 1 (:mod:`.._session.perf.fanout`): the item pytest runs after the current
    # one, and those after it in order while each may be sent ahead, whose requests the current
    # rollout sends ahead once its answer is in (the same candidate's only: :func:`send_ahead`);
    # and the items sent ahead, with the folder and stamp they were sent with
    next_item: RolloutItem | None = None
    following: Callable[[], Iterable[RolloutItem]] = lambda: ()
    sent_ahead: dict[str, tuple[Path, Stamp]] = field(default_factory=dict)
    # each tag's snapshot and source folders, resolved, and its registered hash (the plan's)
    _where: dict[str, tuple[Path, Path, str]] = field(default_factory=dict, repr=False)

    def controller_stopped(self) -> bool:
        """Has the controller stopped (Ctrl-C, a full disk, kill -9)? Nothing paid now is recorded."""
        return self.watch is not None and self.watch.controller_stopped()

    def __post_init__(self) -> None:
        self.candidate_bytes = CandidateBytes(self.on_copy)

    def not_needed(self, tag: str) -> bool:
        """Has the sequential gate decided ``tag`` (:attr:`stopped`, or on a worker the stop marker)?"""
        if self.plan.sequential is None:
            return False
        if tag in self.stopped:
            return True
        run_root = self.spec.project_dir / RUNS_DIR / self.plan.run_id
        return tag in markers.read_stopped(run_root, self.plan.sequential)

    def candidate_dir(self, tag: str) -> tuple[Path, Stamp]:
        """The folder ``tag`` is evaluated from (its read-only snapshot, or a worker's private copy)
        and its stamp, its bytes checked (:mod:`.._engine.candidate_bytes`); else CandidateMismatch."""
        where = self._where.get(tag)
        if where is None:  # resolved once per tag: two realpath walks were a tenth of a no-op rollout
            planned, project = self.plan.candidate(tag), self.spec.project_dir
            where = self._where[tag] = (
                planned.resolve(project),
                planned.resolve_source(project),
                planned.content_hash,
            )
        return self.candidate_bytes.folder(tag, *where)


def send_ahead(context: EvalContext, targets: Sandboxes, current: RolloutItem) -> None:
    """Top up the requests sent ahead to ``current``'s child with those of the items after it (as
    many as :meth:`.._engine.sandbox.Sandboxes.room` allows), in one write, their snapshot's stamp
    taken once, now, for each item's :meth:`RolloutItem.runtest` to compare. The same candidate's
    only: code that kills this process loses only its own rollouts, never its rival arm's."""
    sendable = current._sendable(context)
    held, room = (0, 0) if sendable is None else targets.room(sendable[0])
    batch: list[RolloutItem] = []
    for item in context.following() if room else ():
        if item.key.tag != current.key.tag or len(batch) == room:
            break
        if held:  # already sent, in this order
            held -= 1
        else:
            batch.append(item)
    if not batch or sendable is None:
        return
    rollouts = [(context.pool[item.key.task_id], context.plan.seed_for(item.key.trial)) for item in batch]
    timeout_s = context.spec.rollout_timeout_s
    sent = targets.send_all_ahead(sendable[0], rollouts, split=current.key.split, timeout_s=timeout_s)
    for item in batch[:sent]:
        context.sent_ahead[item.nodeid] = sendable


def booked_cost(scored: Scored) -> float:
    """The $ a rollout's record books (:func:`rollout_record`)."""
    return 0.0 if scored.rollout is None else float(scored.rollout.cost_usd or 0.0)


class InfraError(Exception):
    """The rollout did not measure the agent: missing data, never a 0."""


class TaskFailed(Exception):
    """The agent scored below ``success_threshold`` on this task (not a session failure)."""


class SpecFile(pytest.File):
    """The project's ``capevolve.yaml``: one collector per split being evaluated."""

    def collect(self) -> Iterator[pytest.Collector]:
        plan = self.config.stash[CONTEXT_KEY].plan
        yield SplitCollector.from_parent(self, name=plan.split)


class SplitCollector(pytest.Collector):
    """One split's owed rollouts. Every rollout item shares the spec's path, so what pytest works
    out per item from it (hook proxy, relative path) is worked out here once."""

    @functools.cached_property
    def items_ihook(self) -> Any:
        return self.session.gethookproxy(self.path)

    @functools.cached_property
    def items_relpath(self) -> str:
        return self.session._node_location_to_relpath(absolutepath(self.path))

    def collect(self) -> Iterator[pytest.Item]:
        plan = self.config.stash[CONTEXT_KEY].plan
        for key in plan.owed_keys():
            yield RolloutItem.from_parent(self, name=item_name(plan, key), key=key)


def item_name(plan: EvalPlan, key: RolloutKey) -> str:
    """A rollout item's name under its split: ``<task>[<tag>-t<k>]`` (``b<B>-t<k>`` in a
    replicate block). What :mod:`.._session.plan_check` expects every process to collect."""
    trial = f"t{key.trial}" if not plan.block else f"b{plan.block}-t{key.trial - plan.first_trial}"
    return f"{key.task_id}[{key.tag}-{trial}]"


class RolloutItem(LeanItem):
    """One owed rollout, held by pytest to the session's end: its key and little else (:class:`LeanItem`)."""

    def __init__(self, *, key: RolloutKey, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key = key
        shed(self)

    # pytest asks for an item's hook proxy several times per item, each a look-up by its path
    @property
    def ihook(self) -> Any:
        return self.parent.items_ihook  # type: ignore[union-attr]

    def _location(self) -> tuple[str, int | None, str]:
        """``Item.location`` (relative path, line, :meth:`reportinfo`'s name), the path shared."""
        return (self.parent.items_relpath, None, f"{self.key.split}::{self.name}")  # type: ignore[union-attr]

    location = MadeOnUse(_location)

    def shed(self) -> None:
        """Once the item has run: drop its record (its reports carry copies) and empty fields."""
        properties = self.user_properties
        if properties:
            properties[:] = [p for p in properties if p[0] != RECORD_PROPERTY]
        shed(self)

    def start(self, *, wait: bool = False) -> str | None:
        """Start this item's rollout off the main thread for :meth:`runtest` to collect, if it
        would be paid (:meth:`_sendable`) and the budget share can reserve it (``wait``: once those
        in flight settle); else why the budget refused."""
        context = self.config.stash[CONTEXT_KEY]
        assert context.inflight is not None
        sendable = None if self.nodeid in context.started else self._sendable(context)
        if sendable is None:
            return None
        folder, context.stamps[self.nodeid] = sendable
        refused = context.budget.reserve(self.nodeid, self.key.tag, wait=wait)
        if refused is not None:
            context.stamps.pop(self.nodeid, None)
            return refused
        future = context.inflight.start(context.pool[self.key.task_id], folder, **asked(context, self.key))
        nodeid, tag, budget = self.nodeid, self.key.tag, context.budget
        future.add_done_callback(lambda done: budget.settle(nodeid, tag, booked_cost(done.result())))
        context.started[self.nodeid] = future
        return None

    def _sendable(self, context: EvalContext) -> tuple[Path, Stamp] | None:
        """The snapshot and stamp to start this rollout ahead with, if :meth:`runtest` would pay."""
        if context.not_needed(self.key.tag) or context.controller_stopped() or context.pool_problem:
            return None
        try:
            return context.candidate_dir(self.key.tag)
        except CandidateMismatch:
            return None

    def runtest(self) -> None:
        """Pay for this item's rollout and record it; fail the item as its record says."""
        context = self.config.stash[CONTEXT_KEY]
        ahead = context.sent_ahead.pop(self.nodeid, None) if context.sent_ahead else None
        self._skip_unpaid(context)
        # sent ahead: its stamp was taken before it was sent, as here before a run
        candidate_dir, stamp = ahead if ahead is not None else self._snapshot(context)
        run = self._in_flight if context.inflight is not None else self._run_here
        try:
            record = self._record(context, measured(*run(context, candidate_dir, stamp)))
        except Exception as exc:
            # what came back made this process raise (an output too deep or a number too long to
            # record, a cost no float holds): an infra error on the record, never a rollout left
            # unrecorded, which the gate would pass over and the next session draw afresh
            said = f"the rollout could not be recorded: {type(exc).__name__}: {exc}"[:500]
            record = self._record(context, Scored(rollout=None, infra_error=said))
        self._fail_as_recorded(record, context.spec.success_threshold)

    def _skip_unpaid(self, context: EvalContext) -> None:
        """Before paying: a tag the sequential gate decided, a task of another pool, a stopped controller."""
        if context.not_needed(self.key.tag):
            pytest.skip(f"{SEQUENTIAL_SKIP}: {self.key.tag!r} is decided; this rollout is not paid")
        if context.pool_problem:
            raise InfraError(context.pool_problem)
        if context.controller_stopped() and self.nodeid not in context.started:
            pytest.skip(f"{CONTROLLER_STOPPED}: nothing paid now could be recorded")

    def _snapshot(self, context: EvalContext) -> tuple[Path, Stamp]:
        try:
            return context.candidate_dir(self.key.tag)
        except CandidateMismatch as exc:
            raise InfraError(str(exc)) from None

    def _in_flight(self, context: EvalContext, folder: Path, stamp: Stamp) -> tuple[Scored, str | None]:
        """The rollout :meth:`start` sent off this thread (now, if not yet); did its snapshot change?"""
        refused = self.start(wait=True)
        if refused is not None and self.nodeid not in context.started:
            pytest.skip(f"{BUDGET_SKIP}: {refused}; not started, still owed")
        stamp = context.stamps.pop(self.nodeid, stamp)
        scored = context.started.pop(self.nodeid).result()
        self.take_in_flight_output(scored, context)
        return scored, context.candidate_bytes.changed_during(self.key.tag, folder, stamp)

    def _run_here(self, context: EvalContext, candidate_dir: Path, stamp: Stamp) -> tuple[Scored, str | None]:
        """The rollout run on this thread, and whether its snapshot changed while it ran."""
        key = self.key
        if (refused := context.budget.reserve(self.nodeid, key.tag, wait=False)) is not None:
            pytest.skip(f"{BUDGET_SKIP}: {refused}; not started, still owed")
        answered = self._send_next_ahead(context, candidate_dir, stamp)
        scored = run_reserved(context, key, self.nodeid, candidate_dir)
        if answered:  # compared when it answered, before the next was sent
            return scored, answered[0]
        return scored, context.candidate_bytes.changed_during(key.tag, candidate_dir, stamp)

    def _send_next_ahead(self, context: EvalContext, candidate_dir: Path, stamp: Stamp) -> list[str | None]:
        """At concurrency 1, once this rollout answers: compare its snapshot into the list returned,
        then send the next items ahead (:func:`send_ahead`)."""
        answered: list[str | None] = []
        following, targets = context.next_item, context.runner.targets
        if following is None or following.key.tag != self.key.tag or not isinstance(targets, Sandboxes):
            return answered

        def then() -> None:
            answered.append(context.candidate_bytes.changed_during(self.key.tag, candidate_dir, stamp))
            send_ahead(context, targets, self)

        targets.after_answer = then
        return answered

    def _record(self, context: EvalContext, scored: Scored) -> RolloutRecord:
        """The rollout's record, kept on the item for its reports."""
        record = rollout_record(scored, self.key, context)
        text = record.dumps()
        remember_decoded(text, record)  # in-process, the reports' hooks need not decode it again
        self.user_properties.append((RECORD_PROPERTY, text))
        return record

    @staticmethod
    def _fail_as_recorded(record: RolloutRecord, threshold: float) -> None:
        if record.infra_error:
            raise InfraError(record.infra_error)
        if not record.passed:
            raise TaskFailed(
                f"reward {record.reward:.4g} < success_threshold {threshold:g}"
                + (f": {record.feedback}" if record.feedback else "")
            )

    def take_in_flight_output(self, scored: Scored, context: EvalContext) -> None:
        """In the call phase: replay the in-flight rollout's output under this item's capture, and
        keep its start and end for the call report, as K = 1 gives."""
        captured = scored.captured
        if captured is None:
            return
        if context.routing is not None:
            context.routing.replay(captured)
        span = captured.span()
        if span is not None:
            self.stash[ROLLOUT_SPAN] = span

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, InfraError):
            return f"{INFRA_PREFIX}{excinfo.value}"
        if isinstance(excinfo.value, TaskFailed):
            return f"task failed: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line (the spec file's first: a rollout has no line of its own), not None: pytest
        # places a skip mark's report at the item's line, and asserts it has one
        return self.path, 0, f"{self.key.split}::{self.name}"


ROLLOUT_SPAN = pytest.StashKey[tuple[float, float]]()


def time_call_as_rollout(item: pytest.Item, call: Any) -> None:
    """Give a call phase that collected a rollout run in flight that rollout's own start, stop
    and duration (the call only waited for a future), so ``--durations`` and junit say what
    they say at K = 1. Called before the call's report is made."""
    if call.when != "call" or not isinstance(item, RolloutItem):
        return
    span = item.stash.get(ROLLOUT_SPAN, None)
    if span is None:
        return
    del item.stash[ROLLOUT_SPAN]
    call.start, call.stop = span
    call.duration = max(0.0, span[1] - span[0])


def rollout_record(scored: Scored, key: RolloutKey, context: EvalContext) -> RolloutRecord:
    """The plain-JSON record of one scored rollout (worker side), charged here too: a timeout the
    in-flight watchdog settled never passed through :func:`.._engine.runner.charge`."""
    charge(scored)
    rollout, task = scored.rollout, context.pool[key.task_id]
    return RolloutRecord(
        run_id=context.plan.run_id,
        split=key.split,
        task_id=task.id,
        tag=key.tag,
        trial=key.trial,
        seed=context.plan.seed_for(key.trial),
        candidate_hash=context.plan.candidate(key.tag).content_hash,
        input=plain(task.input),
        reward=scored.reward,
        passed=None if scored.reward is None else scored.reward >= context.spec.success_threshold,
        infra_error=scored.infra_error,
        feedback=scored.feedback,
        metrics=plain(scored.metrics),
        output=None if rollout is None else plain(rollout.output),
        trace=None if rollout is None else plain(rollout.trace),
        cost_usd=booked_cost(scored),
        tokens=0 if rollout is None else int(rollout.tokens or 0),  # checked by the runner
        seconds=scored.seconds,
        judge=scored.judge,
        confinement=scored.confinement,
    )


def asked(context: EvalContext, key: RolloutKey) -> dict[str, Any]:
    """What a rollout is asked with besides its task and folder, wherever it runs."""
    plan, spec = context.plan, context.spec
    return {"seed": plan.seed_for(key.trial), "split": key.split, "timeout_s": spec.rollout_timeout_s}


def run_reserved(context: EvalContext, key: RolloutKey, name: str, folder: Path) -> Scored:
    """Run and score a rollout here, its cost reserved as ``name``: settled, or released if it raised."""
    try:
        scored = run_and_score(context.runner, context.pool[key.task_id], folder, **asked(context, key))
    except BaseException:
        context.budget.release(name)
        raise
    context.budget.settle(name, key.tag, booked_cost(scored))
    return scored


def measured(scored: Scored, changed: str | None) -> Scored:
    """A rollout whose snapshot changed while it ran (``changed``: how) read unknown bytes: missing data."""
    if changed is None:
        return scored
    return replace(scored, reward=None, feedback="", metrics=None, infra_error=changed)


CONTEXT_KEY = pytest.StashKey[EvalContext]()
