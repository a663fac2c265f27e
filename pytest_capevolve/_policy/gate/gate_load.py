"""Explore fast, gate slow, gate alone: the load a gate's rollouts were paid under.

A rollout can depend on load (timeouts, rate limits, a shared GPU), so a gate warns when another session was
paying on the project, or when it paid at a load other than its null controls' (the run's one measure of
noise). Once a null has shown a spread of exactly 0, another null of the same best under the same locked
harness can only repeat it, so planning keeps that one (it still sets the floor) and pays for no other until
the best changes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from ..._store.log.event_kinds import SESSION_LOAD
from ..._store.rundir import RunDir


def load_event(concurrency: int, workers: int, owed_by_tag: Mapping[str, int]) -> dict[str, Any]:
    return {
        "concurrency": int(concurrency),
        "workers": int(workers),
        "in_flight": int(concurrency) * int(workers),
        "paid_tags": dict(sorted(owed_by_tag.items())),
    }


def loads_by_tag(events: Iterable[dict[str, Any]]) -> dict[str, set[int]]:
    loads: defaultdict[str, set[int]] = defaultdict(set)
    for event in (e for e in events if e.get("kind") == SESSION_LOAD):
        for tag in event.get("paid_tags") or {}:
            loads[str(tag)].add(int(event.get("in_flight") or 1))
    return dict(loads)


def null_means_by_load(
    loads: Mapping[str, set[int]], null_tags: Iterable[str], means: Mapping[str, float]
) -> dict[int, float]:
    """The null rollouts' reward mean at each load, over the null tags paid at that load alone."""
    pooled: dict[int, list[float]] = {}
    for tag in null_tags:
        at = loads.get(tag, set())
        if len(at) == 1 and tag in means:
            pooled.setdefault(next(iter(at)), []).append(means[tag])
    return {load: sum(values) / len(values) for load, values in sorted(pooled.items())}


def load_warnings(
    *,
    in_flight: int,
    null_tags: list[str],
    loads: Mapping[str, set[int]],
    means: Mapping[str, float],
    others: list[dict[str, Any]],
) -> list[str]:
    lines = []
    if others:
        who = ", ".join(f"pid {o.get('pid')} in run {o.get('run_id')}" for o in others[:3])
        lines.append(
            f"this gate did not run alone: {len(others)} other session(s) were paying rollouts on "
            f"the project ({who}); explore fast, gate slow, gate alone — a load another session "
            "adds can change rollouts (timeouts, rate limits), so gate again with nothing else running"
        )
    measured = sorted(set().union(*(loads.get(t, set()) for t in null_tags))) if null_tags else []
    if measured and in_flight not in measured:
        by_load = null_means_by_load(loads, null_tags, means)
        shown = ", ".join(f"{load} in flight: {mean:.3f}" for load, mean in by_load.items())
        lines.append(
            f"this gate paid at {in_flight} rollout(s) in flight, but its null controls were "
            f"measured at {', '.join(map(str, measured))}"
            + (f" (null reward means — {shown})" if shown else "")
            + ": the run has not measured noise at this load; gate at the nulls' load, or with "
            "fresh null controls (--capevolve-null N after a new best) at this one"
        )
    return lines


def identical_null(rundir: RunDir, best: str, n_tasks: int, nulls: int) -> str | None:
    """The first of the best's nulls whose checked verdict has every one of ``n_tasks`` deltas exactly 0."""
    for i in range(1, nulls + 1):
        tag = f"{best}-null{i}"
        if tag not in rundir.snapshots.known_tags():
            continue
        verdict = rundir.verdicts.checked(tag)  # as the gate logged it, or refused
        if not verdict or not verdict.get("null_control") or verdict.get("against") != best:
            continue
        rows = list((verdict.get("per_task") or {}).values())
        if len(rows) == n_tasks and n_tasks > 0 and all(row.get("delta") == 0 for row in rows):
            return tag
    return None


def identical_note(tag: str, best: str) -> str:
    return (
        f"null controls: {tag} showed a spread of exactly 0 against {best!r} (a reproducible agent); "
        "no other null is paid for while the best, the adapter and the spec are unchanged"
    )
