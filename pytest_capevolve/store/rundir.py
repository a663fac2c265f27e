"""The run dir: the one place a run's state lives, and the only code that writes it.

Controller only (or the single process without xdist): workers ship records in their reports
and never touch this folder. Every write is atomic (temp file + rename), ``state.json`` and
``events.jsonl`` change under an exclusive lock, and names built from ids are escaped, so a
crash at any instant leaves each file either old or new — never half-written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..project.candidate import SEED_TAG, CandidateError, check_tag, content_hash, escape_id, iter_files
from ..project.paths import from_stored, rebase, to_stored
from ..project.splits import TEST_SPLIT, TestSealError
from .record import RolloutRecord

if TYPE_CHECKING:  # the run dir reads a spec it is handed; it never loads one
    from ..project.spec import Spec

RUNS_DIR = Path(".capevolve") / "runs"
GENESIS = "0" * 64


class RunDirError(Exception):
    """The run dir cannot be used as asked; the message says what to do instead."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dump_json(obj))


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def event_line_hash(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode("utf-8")).hexdigest()


def verify_events(path: Path) -> tuple[int, str | None]:
    """Walk ``events.jsonl``'s hash chain: (lines intact before the first problem, the problem)
    — or (all lines, None).

    Each line carries ``prev`` (the hash of the line before; zeros for the first) and ``seq``
    (one more than the line before's). An edited line breaks the next line's ``prev``; a
    removed or reordered line breaks ``seq``. The chain cannot vouch for its own end: an edit
    to the last line, or lines cut off the end, leave no trace in it."""
    prev_hash, prev_seq = GENESIS, 0
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        try:
            event = json.loads(line)
            seq, prev = int(event["seq"]), str(event["prev"])
        except (ValueError, KeyError, TypeError):
            return number - 1, f"line {number} is not an event (unreadable JSON or no seq/prev): edited"
        if seq != prev_seq + 1:
            expected = prev_seq + 1
            rest = enumerate(lines[number:], start=number + 1)
            later = next((n for n, text in rest if _seq(text) == expected), None)
            if seq > expected and later is None:
                problem = f"line(s) with seq {expected}..{seq - 1} are missing before it"
            else:
                problem = f"seq {seq} after {prev_seq}: lines were reordered or duplicated"
                if later is not None:
                    problem += f" (seq {expected} is at line {later})"
            return number - 1, f"line {number}: {problem}"
        if prev != prev_hash:
            if number == 1:
                return 0, "line 1 was edited: its prev is not the start of a chain"
            return number - 2, (
                f"line {number - 1} was edited: line {number} records prev={prev[:12]}…, "
                f"but line {number - 1} hashes to {prev_hash[:12]}…"
            )
        prev_hash, prev_seq = event_line_hash(line), seq
    return len(lines), None


def _seq(line: str) -> int | None:
    try:
        return int(json.loads(line)["seq"])
    except (ValueError, KeyError, TypeError):
        return None


class RunDir:
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
        self._lock_depth = 0

    # -- locating ---------------------------------------------------------------------------

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
        return cls(root)

    @property
    def project_dir(self) -> Path | None:
        """The project this run belongs to, wherever it lives now: the folder holding
        ``.capevolve/runs/<run_id>/`` (None for a run dir outside that layout). Lexical, so a
        symlinked ``.capevolve`` still names the project it sits in."""
        runs = self.root.absolute().parent
        if runs.parent.name != RUNS_DIR.parent.name or runs.name != RUNS_DIR.name:
            return None
        return runs.parent.parent

    def candidate_dir(self, tag: str) -> Path:
        return self.root / "candidates" / check_tag(tag)

    def rollout_path(self, split: str, task_id: str, tag: str, trial: int) -> Path:
        name = f"{escape_id(task_id)}__{check_tag(tag)}__t{int(trial)}.json"
        return self.root / "rollouts" / split / name

    def write_report(self, markdown: str) -> Path:
        atomic_write_text(self.report_path, markdown)
        return self.report_path

    def verdict_path(self, tag: str) -> Path:
        return self.root / "verdicts" / f"{check_tag(tag)}.json"

    # -- locking, events, state ---------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive across processes; re-entrant within this object, so a compound update
        (rollout + spend + event) takes the lock once."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0
                fcntl.flock(handle, fcntl.LOCK_UN)

    def append_event(self, kind: str, **fields: Any) -> None:
        """Append one line to ``events.jsonl``, chained to the line before by its hash."""
        with self.lock():
            size, prev, seq = self._read_event_tail()
            event = {"seq": seq + 1, "ts": round(time.time(), 3), "kind": kind, **fields}
            event["prev"] = prev
            line = json.dumps(event, sort_keys=True, ensure_ascii=False)
            with open(self.events_path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            self._event_tail = (
                size + len(line.encode("utf-8")) + 1,
                event_line_hash(line),
                seq + 1,
            )

    def _read_event_tail(self) -> tuple[int, str, int]:
        try:
            size = self.events_path.stat().st_size
        except FileNotFoundError:
            return (0, GENESIS, 0)
        if self._event_tail is not None and self._event_tail[0] == size:
            return self._event_tail
        with open(self.events_path, "rb") as handle:
            handle.seek(max(0, size - 65536))
            tail = handle.read()
            if size > 65536 and tail.count(b"\n") < 2:
                handle.seek(0)
                tail = handle.read()
        lines = [ln for ln in tail.decode("utf-8", "replace").split("\n") if ln.strip()]
        if not lines:
            return (size, GENESIS, 0)
        last = lines[-1]
        return (size, event_line_hash(last), int(json.loads(last).get("seq", 0)))

    def read_state(self) -> dict[str, Any]:
        if not self.state_path.is_file():
            return {
                "best_id": SEED_TAG,
                "iterations": 0,
                "stall": 0,
                "spent": {"metric_calls": 0, "usd": 0.0},
                "budget": {},
            }
        return dict(read_json(self.state_path))

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

    # -- candidates ----------------------------------------------------------------------------

    def snapshot_dir(self, tag: str) -> Path:
        """The immutable copy of the candidate's bytes, taken when it was first registered."""
        return self.candidate_dir(tag) / "files"

    def snapshot_size(self, tag: str) -> int:
        """Bytes of the tag's snapshot (what ``simplicity_tiebreak`` compares)."""
        return sum(p.stat().st_size for p in self.snapshot_dir(tag).rglob("*") if p.is_file())

    def candidate_hash(self, tag: str) -> str | None:
        meta = self.candidate_dir(tag) / "candidate.json"
        return str(read_json(meta)["content_hash"]) if meta.is_file() else None

    def register_candidate(self, tag: str, source: Path) -> str:
        """Snapshot ``source`` under ``tag`` (first time) and return its content hash.

        Refuses different bytes under an existing tag: a tag names one capability forever.
        """
        digest = content_hash(source)
        known = self.candidate_hash(tag)
        if known is not None:
            if known != digest:
                raise CandidateError(
                    f"tag {tag!r} was evaluated in run {self.run_id} with different bytes "
                    f"({known}); {source} now hashes to {digest}. Give the new version its own "
                    "tag with --capevolve-tag, or use --capevolve-rerun"
                )
            return digest
        dest = self.candidate_dir(tag)
        staging = dest.with_name(f".{tag}.staging-{secrets.token_hex(4)}")
        files_dir = staging / "files"
        files_dir.mkdir(parents=True)
        for path in iter_files(source):
            target = files_dir / path.relative_to(source.resolve())
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        project = self.project_dir
        stored = to_stored(source, project) if project is not None else str(source.resolve())
        atomic_write_json(staging / "candidate.json", {"tag": tag, "source": stored, "content_hash": digest})
        try:
            os.rename(staging, dest)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            return self.register_candidate(tag, source)
        self.append_event("candidate_registered", tag=tag, content_hash=digest)
        return digest

    def candidate_source(self, tag: str) -> Path:
        """The folder ``tag`` was registered from, in the project's current folder.

        ``candidate.json`` stores it relative to the project (absolute when outside it). Runs
        created before that store it absolutely; a path inside the project's folder of then
        (their ``run_created`` event names it) is mapped to where the project is now."""
        stored = str(read_json(self.candidate_dir(tag) / "candidate.json")["source"])
        project = self.project_dir
        if project is None:
            return Path(stored)
        if Path(stored).is_absolute():
            stored = rebase(stored, self._created_in())
        return from_stored(stored, project)

    def _created_in(self) -> Path | None:
        """The project's folder when a run that stores absolute paths was created, from its
        ``run_created`` event (the first line); None for runs that store them relative."""
        if not self.events_path.is_file():
            return None
        with open(self.events_path, encoding="utf-8") as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("kind") == "run_created" and isinstance(event.get("spec"), str):
                        spec = Path(event["spec"])
                        return spec.parent if spec.is_absolute() else None
        return None

    def known_tags(self) -> list[str]:
        base = self.root / "candidates"
        return sorted(p.name for p in base.glob("*") if (p / "candidate.json").is_file())

    # -- rollouts ----------------------------------------------------------------------------

    def write_rollout(self, record: RolloutRecord) -> Path:
        path = self.rollout_path(record.split, record.task_id, record.tag, record.trial)
        atomic_write_json(path, record.to_json())
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
        folder = self.root / "rollouts" / split
        return [
            RolloutRecord.loads(path.read_text(encoding="utf-8"), str(path))
            for path in sorted(folder.glob("*.json"))
        ]

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

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.is_file():
            return []
        text = self.events_path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _budget(spec: Spec) -> dict[str, Any]:
    return {
        "max_metric_calls": spec.max_metric_calls,
        "max_usd": spec.max_usd,
        "max_iterations": spec.max_iterations,
        "stall": spec.stall,
        "stop_condition": spec.stop_condition,
    }
