"""Rollout files: ``rollouts/<split>/<task>__<tag>__t<k>.json``, written once, read back checked.

A part of :class:`.rundir.RunDir`. A damaged file is quarantined (moved aside, never deleted)
and counts as missing, so the next session pays it again; a file of a newer schema is refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..project.candidate import legacy_escape_id
from ..project.splits import TEST_SPLIT, TestSealError
from .files import RunDirError, atomic_write_json
from .record import RecordError, RolloutRecord


class RolloutFiles:
    """The run dir's rollout records (a part of :class:`.rundir.RunDir`)."""

    root: Path
    run_id: str
    notices: list[str]
    lock: Callable[[], AbstractContextManager[None]]
    append_event: Callable[..., None]
    update_state: Callable[[Callable[[dict[str, Any]], None]], dict[str, Any]]
    rollout_path: Callable[..., Path]

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

    def rollouts(self, split: str, block: int | None = 0) -> list[RolloutRecord]:
        """Persisted rollouts of a split, of replicate block ``block`` (default 0: what every
        decision reads; None: every block). The test split is refused here, when asked: only
        the seal (:mod:`.seal`) reads it, and only during finalize or after the seal burned."""
        if split == TEST_SPLIT:
            raise TestSealError(
                f"run {self.run_id}: test rollouts are read only through the seal "
                "(pytest --capevolve-finalize, then capevolve measure)"
            )
        records = self._read_rollouts(split)
        return records if block is None else [r for r in records if r.block == block]

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
