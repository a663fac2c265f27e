"""The run dir: the one place a run's state lives, and the only code that writes it.

Controller only (or the single process without xdist): workers ship records in their reports
and never touch this folder. Every write is atomic (temp file + rename), ``state.json`` and
``events.jsonl`` change under an exclusive lock, and names built from ids are escaped, so a
crash at any instant leaves each file either old or new — never half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..project.candidate import SEED_TAG, check_tag, escape_id, legacy_escape_id
from ..project.paths import to_stored
from ..project.splits import TEST_SPLIT, TestSealError
from .claims import Claims
from .events import EventLog
from .files import RunDirError, RunLock, atomic_write_json, atomic_write_text, exclusive, read_json
from .record import RecordError, RolloutRecord
from .snapshots import Snapshots

if TYPE_CHECKING:  # the run dir reads a spec it is handed; it never loads one
    from ..project.spec import Spec

RUNS_DIR = Path(".capevolve") / "runs"
__all__ = ["RUNS_DIR", "RunDir", "RunDirError", "new_run_id"]


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class RunDir(EventLog, Snapshots):
    """One run's folder: ``<project>/.capevolve/runs/<run_id>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_id = root.name
        self.spec_lock_path = root / "spec.lock.yaml"
        self.splits_path = root / "splits.json"
        self.state_path = root / "state.json"
        self.events_path = root / "events.jsonl"
        self.report_path = root / "report.md"
        self._event_tail: tuple[int, str, int] | None = None  # (file size, last hash, last seq)
        self.lock = RunLock(root)
        self.claims = Claims(root)
        self.created = False  # this process made the folder (see :meth:`discard_if_created`)
        self.notices: list[str] = []  # damage found and handled (quarantine, rebuilt state)

    # -- locating ---------------------------------------------------------------------------

    @staticmethod
    @contextlib.contextmanager
    def project_lock(project_dir: Path) -> Iterator[None]:
        """Exclusive across the project's sessions while one picks (or creates) its run and
        plans in it: two sessions started together on a fresh project get one run."""
        with exclusive(project_dir / RUNS_DIR.parent / "runs.lock"):
            yield

    def discard_if_created(self) -> None:
        """Remove the run folder this process created, when the session that created it was
        refused while planning (under :meth:`project_lock`, so nobody else has seen it)."""
        if self.created:
            shutil.rmtree(self.root, ignore_errors=True)

    @classmethod
    def resolve(
        cls, project_dir: Path, run_id: str | None = None, new: bool = False, create: bool = True
    ) -> RunDir:
        """The run to use: ``run_id`` if given, a fresh one if ``new``, else the newest.

        ``create=False`` is for commands that only read: with no run yet they get an error,
        never an empty run folder left behind."""
        runs = project_dir / RUNS_DIR
        if run_id is not None:
            root = runs / run_id
            if run_id != Path(run_id).name or not root.is_dir():
                known = ", ".join(sorted(p.name for p in runs.glob("*") if p.is_dir())) or "none"
                raise RunDirError(f"no run {run_id!r} under {runs} (runs there: {known})")
            return cls(root)
        if not new:
            existing = sorted(p for p in runs.glob("*") if (p / "spec.lock.yaml").is_file())
            if existing:
                return cls(existing[-1])
        if not create:
            raise RunDirError(f"no run under {runs} yet; evaluate first (pytest --capevolve-run)")
        root = runs / new_run_id()
        root.mkdir(parents=True)
        rundir = cls(root)
        rundir.created = True
        return rundir

    @property
    def project_dir(self) -> Path | None:
        """The project this run belongs to, wherever it lives now: the folder holding
        ``.capevolve/runs/<run_id>/`` (None for a run dir outside that layout). Lexical, so a
        symlinked ``.capevolve`` still names the project it sits in."""
        runs = self.root.absolute().parent
        if runs.parent.name != RUNS_DIR.parent.name or runs.name != RUNS_DIR.name:
            return None
        return runs.parent.parent

    def rollout_path(self, split: str, task_id: str, tag: str, trial: int) -> Path:
        name = f"{escape_id(task_id)}__{check_tag(tag)}__t{int(trial)}.json"
        return self.root / "rollouts" / split / name

    def write_report(self, markdown: str) -> Path:
        atomic_write_text(self.report_path, markdown)
        return self.report_path

    def verdict_path(self, tag: str) -> Path:
        return self.root / "verdicts" / f"{check_tag(tag)}.json"

    # -- locking, events, state ---------------------------------------------------------------

    def read_state(self) -> dict[str, Any]:
        """``state.json``. Missing or unreadable in a run that has events, it is rebuilt from
        the event log (the damaged file moved aside) — never reset to a fresh run's state,
        which would bring back the seed as best and the spend to 0."""
        try:
            state = read_json(self.state_path)
            if isinstance(state, dict) and isinstance(state.get("spent"), dict):
                return dict(state)
            problem = "not a state object"
        except FileNotFoundError:
            problem = "missing"
        except (ValueError, UnicodeDecodeError) as exc:
            problem = f"unreadable ({exc})"
        if not self.events_path.is_file():
            if problem == "missing":
                return _fresh_state()
            raise RunDirError(
                f"{self.state_path}: {problem}, and there is no events.jsonl to rebuild it from"
            )
        with self.lock():
            if self.state_path.is_file() and problem == "missing":
                return dict(read_json(self.state_path))  # another process rebuilt it meanwhile
            if self.state_path.exists():
                aside = self.state_path.with_name(f"state.json.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
                os.replace(self.state_path, aside)
            state = self.replay_state()
            atomic_write_json(self.state_path, state)
            self.append_event(
                "state_rebuilt", problem=problem, spent=state["spent"], best_id=state["best_id"]
            )
        self.notices.append(f"{self.state_path} was {problem}: rebuilt from {self.events_path.name}")
        return state

    def replay_state(self) -> dict[str, Any]:
        """What ``state.json`` should hold, from the event log alone: spend from ``rollout``
        events (a rollout's cost from its file for logs older than ``cost_usd`` in events), the
        counters, the best and the optimizer's spend from ``decision`` events (logs from before
        decisions were booked: iterations from ``best_changed``, stall from ``stalled``), budget
        from the lock."""
        state = _fresh_state()
        if self.spec_lock_path.is_file():
            lock = yaml.safe_load(self.spec_lock_path.read_text(encoding="utf-8")) or {}
            state["budget"] = {key: lock.get(key) for key in BUDGET_KEYS}
        events = self.events()
        booked = any(e.get("kind") == "decision" for e in events)
        spent = state["spent"]
        for event in events:
            kind = event.get("kind")
            if kind == "rollout":
                spent["metric_calls"] += 1
                cost = event.get("cost_usd")
                if cost is None:
                    cost = self._file_cost(event)
                spent["usd"] += float(cost)
            elif kind == "decision":
                state["iterations"] += 1
                if event.get("decision") == "reject":
                    state["stall"] += 1
                elif event.get("decision") == "accept":
                    state["stall"], state["best_id"] = 0, str(event["tag"])
                for what in ("usd", "tokens", "seconds"):
                    spent[f"optimizer_{what}"] = spent.get(f"optimizer_{what}", 0) + event.get(
                        f"optimizer_{what}", 0
                    )
            elif kind == "best_changed":
                state["best_id"] = str(event["best_id"])
                if not booked:
                    state["iterations"] += 1
                    state["stall"] = 0
            elif kind == "stalled" and not booked:
                state["stall"] += 1
        return state

    def _file_cost(self, event: dict[str, Any]) -> float:
        try:
            path = self.rollout_path(event["split"], event["task_id"], event["tag"], event["trial"])
            return float(read_json(path).get("cost_usd") or 0.0)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return 0.0

    def best(self) -> str:
        """The current best's tag (``seed`` until something is accepted)."""
        return str(self.read_state().get("best_id", SEED_TAG))

    def update_state(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        with self.lock():
            state = self.read_state()
            change(state)
            atomic_write_json(self.state_path, state)
            return state

    # -- the spec and the splits, frozen on first use --------------------------------------------

    def ensure_spec_lock(self, spec: Spec) -> None:
        """Write ``spec.lock.yaml`` on first use; later, refuse a spec whose frozen keys moved.

        Paths compare in their stored, project-relative form (an old lock's absolute paths are
        mapped to it), so a moved project continues its run; an old lock naming the same places
        is left as it is."""
        lock = spec.to_lock()
        if not self.spec_lock_path.is_file():
            atomic_write_text(self.spec_lock_path, yaml.safe_dump(lock, sort_keys=True))
            self.update_state(lambda s: s["budget"].update(_budget(spec)))
            self.append_event("run_created", spec=to_stored(spec.path, spec.project_dir), run_id=self.run_id)
            return
        old = spec.comparable_lock(yaml.safe_load(self.spec_lock_path.read_text(encoding="utf-8")) or {})
        changed = [k for k in spec.FROZEN_KEYS if old.get(k) != lock.get(k)]
        if changed:
            raise RunDirError(
                f"{spec.path}: {', '.join(changed)} changed since run {self.run_id} began "
                f"(was {', '.join(repr(old.get(k)) for k in changed)}); old rollouts would "
                "not be comparable. Restore it, or start a new run with --capevolve-new-run"
            )
        moved = {k: lock[k] for k in lock if old.get(k) != lock[k]}
        if moved:
            atomic_write_text(self.spec_lock_path, yaml.safe_dump(lock, sort_keys=True))
            self.update_state(lambda s: s["budget"].update(_budget(spec)))
            self.append_event("spec_changed", changed=sorted(moved))

    def splits(self) -> dict[str, Any] | None:
        """The frozen splits, or None before the first evaluation froze them."""
        return dict(read_json(self.splits_path)) if self.splits_path.is_file() else None

    def ensure_splits(self, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The frozen splits; computed and written only the first time. (The test split's seal
        state lives in ``seal.json``, so this file never changes once written.)"""
        if self.splits_path.is_file():
            return dict(read_json(self.splits_path))
        splits = compute()
        atomic_write_json(self.splits_path, splits)
        self.append_event("splits_frozen", sizes={k: len(splits[k]) for k in ("train", "val", "test")})
        return splits

    # -- rollouts ----------------------------------------------------------------------------

    def write_rollout(self, record: RolloutRecord) -> Path:
        path = self.rollout_path(record.split, record.task_id, record.tag, record.trial)
        atomic_write_json(path, record.to_json())
        # a run written before case-safe names may hold this rollout under its old name
        legacy = path.with_name(
            f"{legacy_escape_id(record.task_id)}__{record.tag}__t{int(record.trial)}.json"
        )
        if legacy.name != path.name:
            legacy.unlink(missing_ok=True)
        return path

    def record_rollout(self, record: RolloutRecord) -> dict[str, Any]:
        """Persist one rollout and account for it under one lock: the record file, its spend in
        ``state.json`` and its event line. Returns the updated state."""

        def spend(state: dict[str, Any]) -> None:
            state["spent"]["metric_calls"] = int(state["spent"]["metric_calls"]) + 1
            state["spent"]["usd"] = float(state["spent"]["usd"]) + float(record.cost_usd)

        with self.lock():
            self.write_rollout(record)
            state = self.update_state(spend)
            self.append_event(
                "rollout",
                split=record.split,
                task_id=record.task_id,
                tag=record.tag,
                trial=record.trial,
                reward=record.reward,
                infra_error=record.infra_error,
                cost_usd=record.cost_usd,
            )
        return state

    def rollouts(self, split: str) -> list[RolloutRecord]:
        """Persisted rollouts of a split. The test split is refused here, when asked: only the
        seal (:mod:`.seal`) reads it, and only during finalize or after the seal burned."""
        if split == TEST_SPLIT:
            raise TestSealError(
                f"run {self.run_id}: test rollouts are read only through the seal "
                "(pytest --capevolve-finalize, then capevolve measure)"
            )
        return self._read_rollouts(split)

    def _read_rollouts(self, split: str) -> list[RolloutRecord]:
        """Every readable record of the split. A damaged file (cut short, not JSON, fields
        missing) is quarantined — moved to ``rollouts/.quarantine/<split>/``, never deleted —
        and so counts as missing: the next session pays it again. Said in :attr:`notices`."""
        folder = self.root / "rollouts" / split
        records = []
        for path in sorted(folder.glob("*.json")):
            try:
                records.append(RolloutRecord.loads(path.read_text(encoding="utf-8"), str(path)))
            except FileNotFoundError:
                continue  # quarantined by another process meanwhile
            except RecordError as exc:
                if exc.newer:
                    raise RunDirError(str(exc)) from None
                self.quarantine(path, str(exc).removeprefix(f"{path}: "))
            except (UnicodeDecodeError, OSError) as exc:
                self.quarantine(path, f"unreadable: {exc}")
        return records

    def quarantine(self, path: Path, problem: str) -> Path:
        """Move a damaged rollout file aside (under the run's lock) and log it."""
        rel = path.relative_to(self.root)
        dest = self.root / "rollouts" / ".quarantine" / rel.parent.name / f"{path.name}.{time.time_ns()}"
        with self.lock():
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)
            self.append_event(
                "rollout_quarantined",
                file=rel.as_posix(),
                problem=problem,
                moved_to=dest.relative_to(self.root).as_posix(),
            )
        self.notices.append(
            f"{path}: {problem}; quarantined to {dest.relative_to(self.root)}: treated as missing, "
            "so it is paid again"
        )
        return dest

    # -- the loop: decisions, memory, work copies --------------------------------------------------

    def decisions(self) -> list[dict[str, Any]]:
        """Every booked decision (``decision`` events), in the order booked."""
        return [e for e in self.events() if e.get("kind") == "decision"]

    def write_memory(self, ledger_markdown: str, rejected: list[dict[str, Any]]) -> None:
        """Rewrite the loop's memory: ``LEDGER.md`` and ``rejected.jsonl`` (views of the log)."""
        atomic_write_text(self.root / "LEDGER.md", ledger_markdown)
        lines = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rejected)
        atomic_write_text(self.root / "rejected.jsonl", lines)

    def work_dir(self, tag: str) -> Path:
        """Where an optimizer edits candidate ``tag`` (a copy of its parent's snapshot)."""
        return self.root / "work" / check_tag(tag)

    def hill_climb_dir(self, tag: str | None = None) -> Path:
        """``hill_climb/`` (the loop's own files), or one iteration's folder in it: its prompt,
        the optimizer's output and exit, the gate session's output, its diff and outcome."""
        base = self.root / "hill_climb"
        return base if tag is None else base / check_tag(tag)

    # -- verdicts, events, reports --------------------------------------------------------------

    def write_verdict(self, verdict: dict[str, Any]) -> Path:
        """Write ``verdicts/<tag>.json`` (every number the decision rests on) and log it."""
        path = self.verdict_path(verdict["tag"])
        atomic_write_json(path, verdict)
        self.append_event(
            "verdict",
            **{k: verdict.get(k) for k in ("tag", "against", "decision", "basis", "p_value", "delta_mean")},
        )
        return path

    def verdict(self, tag: str) -> dict[str, Any] | None:
        path = self.verdict_path(tag)
        return dict(read_json(path)) if path.is_file() else None

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Every verdict file of the run, by tag."""
        folder = self.root / "verdicts"
        return {path.stem: dict(read_json(path)) for path in sorted(folder.glob("*.json"))}


BUDGET_KEYS = ("max_metric_calls", "max_usd", "max_iterations", "stall", "stop_condition")


def _fresh_state() -> dict[str, Any]:
    return {
        "best_id": SEED_TAG,
        "iterations": 0,
        "stall": 0,
        "spent": {"metric_calls": 0, "usd": 0.0},
        "budget": {},
    }


def _budget(spec: Spec) -> dict[str, Any]:
    return {
        "max_metric_calls": spec.max_metric_calls,
        "max_usd": spec.max_usd,
        "max_iterations": spec.max_iterations,
        "stall": spec.stall,
        "stop_condition": spec.stop_condition,
    }
