"""A cap-evolve run dir, read: its frozen splits, state, candidate snapshots and rollouts.

cap-evolve keeps a run in ``.capevolve/run_<ts>/``::

    state.json        best_id, budget, spent
    splits.json       train / val / test ids, the split seed, test_used (its seal)
    candidates/<id>/  a copy of each candidate's capability folder
    rollouts/<split>/<task>__<tag>__t<k>.json   {"input", "rollout": {...}, "score": {...}}
    events.jsonl      its log

Trial k ran with seed ``splits.seed + k``; a trial with ``rollout.error`` or ``raw.errored`` is
missing data. Its finalize scores test as ``FINAL`` (the best) and ``FINAL_seed``. Read-only."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._project.adapter import AdapterError, check_reward
from ..._project.candidate import SEED_TAG, CandidateError, check_tag
from ..._store.files import RunDirError
from ..._store.rollouts.record import RolloutRecord


@dataclass(frozen=True)
class CapEvolveRollout:
    """One rollout file of a cap-evolve run, parsed but not yet tied to a run of ours."""

    split: str
    task_id: str
    tag: str
    trial: int
    path: Path
    data: dict[str, Any]

    def record(
        self, *, run_id: str, tag: str, seed: int, candidate_hash: str, threshold: float
    ) -> RolloutRecord:
        """The record of ours it is. cap-evolve clamps rewards; a reward out of [0, 1] or a
        trial flagged errored there is an infra error here too: missing data, never a 0."""
        rollout = self.data.get("rollout") or {}
        score = self.data.get("score") or {}
        infra = rollout.get("error") or None
        if infra is None and (score.get("raw") or {}).get("errored"):
            infra = "cap-evolve's scorer flagged this trial errored (score.raw.errored)"
        reward: float | None = None
        if infra is None:
            try:
                reward = check_reward(score.get("reward"), f"{self.path}: score.reward")
            except AdapterError as exc:
                infra = f"invalid score: {exc}"
        return RolloutRecord(
            run_id=run_id,
            split=self.split,
            task_id=self.task_id,
            tag=tag,
            trial=self.trial,
            seed=seed,
            candidate_hash=candidate_hash,
            input=self.data.get("input"),
            reward=reward,
            passed=None if reward is None else reward >= threshold,
            infra_error=None if infra is None else str(infra),
            feedback=str(score.get("feedback") or ""),
            metrics=score.get("metrics"),
            output=rollout.get("output"),
            trace=rollout.get("trace"),
            cost_usd=float(rollout.get("cost_usd") or 0.0),
            tokens=int(rollout.get("tokens") or 0),
            seconds=float(rollout.get("seconds") or 0.0),
        )


@dataclass
class CapEvolveRun:
    root: Path
    splits: dict[str, list[str]]
    split_seed: int
    test_used: bool
    best_id: str
    state: dict[str, Any]
    snapshots: dict[str, Path] = field(default_factory=dict)
    rollouts: list[CapEvolveRollout] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # files skipped, with why

    def tag_for(self, rollout: CapEvolveRollout) -> str:
        """Our tag for a rollout's candidate: finalize's ``FINAL`` is the best it scored; a
        screen's ``<id>__screenN`` is ``<id>-screenN`` (a tag here has no double underscore)."""
        final = {"FINAL": self.best_id, "FINAL_seed": SEED_TAG}.get(rollout.tag)
        return rollout.tag.replace("__", "-") if final is None else final

    def snapshot_for(self, rollout: CapEvolveRollout) -> Path | None:
        """The candidate folder a rollout measured: a screen's is its candidate's."""
        tag = {"FINAL": self.best_id, "FINAL_seed": SEED_TAG}.get(rollout.tag, rollout.tag)
        return self.snapshots.get(tag.split("__")[0])


def read_run(root: Path) -> CapEvolveRun:
    """Read a cap-evolve run dir, or raise :class:`RunDirError` naming what is wrong."""
    root = root.resolve()
    splits_raw = _json(root / "splits.json")
    state = _json(root / "state.json")
    try:
        splits = {name: [str(i) for i in splits_raw.get(name) or []] for name in ("train", "val", "test")}
        seed = int(splits_raw.get("seed") or 0)
    except (AttributeError, TypeError, ValueError):
        raise RunDirError(f"{root / 'splits.json'}: not cap-evolve's splits (train/val/test/seed)") from None
    if not splits["val"]:
        raise RunDirError(f"{root / 'splits.json'}: the val split is empty; there is nothing to gate")
    run = CapEvolveRun(
        root=root,
        splits=splits,
        split_seed=seed,
        test_used=bool(splits_raw.get("test_used")),
        best_id=str(state.get("best_id") or SEED_TAG),
        state=state,
        snapshots={
            folder.name: folder for folder in sorted((root / "candidates").glob("*")) if folder.is_dir()
        },
    )
    for split in ("train", "val", "test"):
        by_length = sorted(splits[split], key=len, reverse=True)
        for path in sorted((root / "rollouts" / split).glob("*.json")):
            parsed = _parse(path, split, by_length)
            if isinstance(parsed, str):
                run.unreadable.append(parsed)
            else:
                run.rollouts.append(parsed)
    return run


def _parse(path: Path, split: str, task_ids: list[str]) -> CapEvolveRollout | str:
    """``<task>__<tag>__t<k>.json``; the task is the split's longest id the name starts with,
    since a tag may hold ``__`` itself (a screen's ``<id>__screenN``)."""
    stem, sep, trial = path.stem.rpartition("__t")
    task_id = next((t for t in task_ids if stem.startswith(f"{t}__")), None)
    if task_id is None:
        task_id, _, tag = stem.rpartition("__")
    else:
        tag = stem[len(task_id) + 2 :]
    if not (sep and trial.isdigit() and task_id and tag):
        return f"{path}: not named <task>__<tag>__t<k>.json with a task of the {split} split"
    try:
        check_tag(tag.replace("__", "-"))
    except CandidateError as exc:
        return f"{path}: {exc}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({exc})"
    if not isinstance(data, dict) or not isinstance(data.get("score"), dict):
        return f"{path}: not a cap-evolve rollout (no 'score' object)"
    task_id = str(data["score"].get("task_id") or task_id)
    return CapEvolveRollout(split, task_id, tag, int(trial), path, data)


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(
            f"{path} is missing: give a cap-evolve run dir (.capevolve/run_<timestamp>/)"
        ) from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object")
    return data
