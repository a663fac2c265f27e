"""The run dir: the one place a run's state lives, and the only code that writes it.

Controller only. Every write is atomic and the log and state change under an exclusive lock, so
a crash leaves each file old or new — never half-written."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .._project.candidate import check_tag, escape_id
from .._project.spec import GUARD_KEYS, to_stored
from .._project.way_on import evaluate_first
from .decisions.state import BUDGET_KEYS, RunState
from .decisions.verdicts import Verdicts
from .files import (
    RunDirError,
    RunLock,
    atomic_write_json,
    atomic_write_parts,
    atomic_write_text,
    read_run_json,
)
from .log.event_kinds import DECISION, RUN_CREATED, SPEC_CHANGED, SPLITS_FROZEN
from .log.events import EventLog
from .log.log_views import EventsDigest, LogView, PagesStamp
from .rollouts.index import RolloutIndex
from .rollouts.rollout_files import RolloutFiles
from .sessions.claims import Claims
from .sessions.order_secret import OrderSecret, namer
from .snapshots import Snapshots

if TYPE_CHECKING:  # the run dir reads a spec it is handed; it never loads one
    from .._project.spec import Spec

RUNS_DIR = Path(".capevolve") / "runs"
__all__ = ["RUNS_DIR", "RunDir", "RunDirError", "new_run_id", "rollouts_of"]


def rollouts_of(split: str, tag: str) -> str:
    """Where a tag's rollouts of a split are, in words a person can follow: their files are named from
    the run's secret (:meth:`RunDir.rollout_path`), so by the tag each file holds (``capevolve diagnose``
    names a tag's files task by task)."""
    return f"rollouts/{split}/*.json whose tag is {tag}"


def new_run_id(taken: Iterable[str] = ()) -> str:
    """``YYYYmmdd-HHMMSS-xxxxxx`` in UTC: sorts by creation, which is how "the newest run" and a
    bytes' latest decision are found (local time sorts wrong across a clock change or a second
    time zone; two in one second get increasing suffixes, so the later still sorts last)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    same_second = [int(t[-6:], 16) for t in taken if re.fullmatch(rf"{stamp}-[0-9a-f]{{6}}", t)]
    suffix = max(same_second) + 1 if same_second else secrets.randbelow(0x800000)
    return f"{stamp}-{suffix:06x}"


class RunDir:
    """One run's folder, ``<project>/.capevolve/runs/<run_id>/``, made of typed parts (``log``,
    ``state``, ``snapshots``, ``rollouts``, ``verdicts``); what is about the whole run stays here."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_id = root.name
        self.spec_lock_path = root / "spec.lock.yaml"
        self.splits_path = root / "splits.json"
        self.state_path = root / "state.json"
        self.events_path = root / "events.jsonl"
        self.report_path = root / "report.md"
        self.dashboard_path = root / "dashboard.html"
        self.views_path = root / "views.json"  # what report.md and dashboard.html were drawn from
        self._split_folders: dict[str, Path] = {}
        self._rollout_name: Callable[[str], str] | None = None  # made from the secret on first use
        self.lock = RunLock(root)
        self.index = RolloutIndex(root)  # what exists, so readers need not open every file
        self.created = False  # this process made the folder (see :meth:`discard_if_created`)
        self.notices: list[str] = []  # damage found and handled (quarantine, rebuilt state)
        self.log = EventLog(self.events_path, self.lock)
        self.claims = Claims(root, self.log.append_event)
        self.state = RunState(self.state_path, self.spec_lock_path, self.log, self.notices)
        # keys task orders, names snapshot folders and rollout files
        self.order_secret = OrderSecret(root, self.log, self.project_dir)
        self.snapshots = Snapshots(root, self.run_id, self.log, self.project_dir, self.order_secret.read)
        self.rollouts = RolloutFiles(
            root, self.run_id, self.log, self.state, self.index, self.rollout_path, self.notices, self.claims
        )
        self.verdicts = Verdicts(root, self.log)
        self.pages_stamp = PagesStamp(self.views_path)
        # the files derived from the log, in the order verify checks them (one repair path)
        self.log_views: tuple[LogView, ...] = (
            self.state,
            self.rollouts.index_view,
            EventsDigest(root, self.log),
            self.pages_stamp,
        )

    # -- locating ---------------------------------------------------------------------------

    @staticmethod
    @contextlib.contextmanager
    def project_lock(project_dir: Path) -> Iterator[None]:
        """Held while a session picks its run and plans: two sessions on a fresh project get one run
        (an ``flock`` on ``runs.lock``: the kernel drops it if the holder dies)."""
        lock_file = project_dir / RUNS_DIR.parent / "runs.lock"
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_file, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def discard_if_created(self, refusal: BaseException) -> None:
        """Remove the folder this process created for a session refused while planning; the refusal then
        names no run (``--capevolve-run-id`` with the id it named would find none)."""
        if self.created:
            shutil.rmtree(self.root, ignore_errors=True)
            named, said = f"run {self.run_id}", "the new run (not kept)"
            refusal.args = tuple(a.replace(named, said) if isinstance(a, str) else a for a in refusal.args)

    @classmethod
    def resolve(
        cls, project_dir: Path, run_id: str | None = None, new: bool = False, create: bool = True
    ) -> RunDir:
        """``run_id`` if given, a fresh run if ``new``, else the newest. ``create=False`` (commands
        that only read): no run yet is an error, never an empty folder left behind."""
        runs = project_dir / RUNS_DIR
        if run_id is not None:
            root = runs / run_id
            if run_id != Path(run_id).name or not root.is_dir():
                known = ", ".join(sorted(p.name for p in runs.glob("*") if p.is_dir())) or "none"
                raise RunDirError(f"no run {run_id!r} under {runs} (runs there: {known})")
            return cls.opened(root)
        if not new:
            existing = sorted(p for p in runs.glob("*") if (p / "spec.lock.yaml").is_file())
            unlocked = sorted(p for p in runs.glob("*") if _lock_deleted(p))
            if unlocked and (not existing or unlocked[-1].name > existing[-1].name):
                raise RunDirError(_LOCK_DELETED.format(run=unlocked[-1]))
            if existing:
                return cls.opened(existing[-1])
        if not create:
            raise RunDirError(f"no run under {runs} yet; {evaluate_first(project_dir)}")
        root = runs / new_run_id(p.name for p in runs.glob("*"))
        root.mkdir(parents=True)
        rundir = cls(root)
        rundir.created = True
        return rundir

    @classmethod
    def opened(cls, root: Path) -> RunDir:
        """An existing run, refused before anything reads it when a development build wrote it: no
        reader below bridges those formats (a damaged lock is left to the reader it stops). A run whose
        log froze its keys is today's format: its lock is parsed where it is checked, not here too."""
        rundir = cls(root)
        if not rundir.spec_lock_path.is_file() or rundir._frozen_logged():
            return rundir
        try:
            locked = yaml.safe_load(rundir.spec_lock_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return rundir
        if isinstance(locked, dict):
            _refuse_pre_release(rundir.spec_lock_path, locked)
        return rundir

    def _frozen_logged(self) -> bool:
        """Whether ``run_created`` logged the frozen keys (today's format): such a run's lock is held to
        them where it is checked, and a key missing from it is an edit, said so there."""
        created = self.log.of_kinds(RUN_CREATED)
        return bool(created) and isinstance(created[0].get("frozen"), dict)

    @property
    def project_dir(self) -> Path | None:
        """The folder holding ``.capevolve/runs/<run_id>/`` (None outside that layout); lexical, so
        a symlinked ``.capevolve`` still names the project it sits in."""
        runs = self.root.absolute().parent
        if runs.parent.name != RUNS_DIR.parent.name or runs.name != RUNS_DIR.name:
            return None
        return runs.parent.parent

    def rollout_path(self, split: str, task_id: str, tag: str, trial: int) -> Path:
        """``rollouts/<split>/<task>__<name>.json``, ``<name>`` a MAC of the rest of the key under the run's
        secret: candidate code, which can ``stat`` a file it names (Landlock governs opening and listing,
        not ``stat``), cannot name another arm's record. Controller only (the secret is read here)."""
        if self._rollout_name is None:
            self._rollout_name = namer(self.order_secret.read(), "rollout-file")
        mac = self._rollout_name(f"{split}/{check_tag(tag)}/{int(trial)}/{task_id}")
        name = f"{escape_id(task_id)}__{mac}.json"
        folder = self._split_folders.get(split)
        if folder is None:  # one Path per split, not three joins per rollout persisted
            folder = self._split_folders[split] = self.root / "rollouts" / split
        return folder / name

    def rollout_file(self, key: tuple[str, str, str, int]) -> str:
        """A rollout's file relative to the run dir, as quarantine and vanish events name it."""
        return self.rollout_path(*key).relative_to(self.root).as_posix()

    def write_report(self, markdown: str) -> Path:
        atomic_write_text(self.report_path, markdown)
        return self.report_path

    def write_dashboard(self, page: str | Iterable[str]) -> Path:
        """``page``: the HTML, whole or in pieces written as they come (never held whole)."""
        atomic_write_parts(self.dashboard_path, [page] if isinstance(page, str) else page)
        return self.dashboard_path

    # -- locking, events, state ---------------------------------------------------------------

    def ensure_spec_lock(self, spec: Spec) -> None:
        """Write ``spec.lock.yaml`` on first use; later, refuse a spec whose frozen keys moved.
        Paths compare project-relative, so a moved project continues its run."""
        lock = spec.to_lock()
        if not self.spec_lock_path.is_file() and _lock_deleted(self.root):
            raise RunDirError(_LOCK_DELETED.format(run=self.root))
        if not self.spec_lock_path.is_file():
            self._write_spec_lock(lock, spec)
            self.log.append_event(
                RUN_CREATED,
                spec=to_stored(spec.path, spec.project_dir),
                run_id=self.run_id,
                frozen={key: spec.locked_value(lock, key) for key in spec.FROZEN_KEYS},
            )
            self.order_secret.create()
            return
        try:
            locked = yaml.safe_load(self.spec_lock_path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            locked = exc
        if not isinstance(locked, dict):
            raise RunDirError(
                f"{self.spec_lock_path}: damaged, not the YAML mapping the run froze "
                f"({type(locked).__name__}); restore it, or start a new run with --capevolve-new-run"
            )
        self._check_frozen(locked, spec)
        _refuse_pre_release(self.spec_lock_path, locked)
        old = locked
        was = {k: spec.locked_value(old, k) for k in spec.FROZEN_KEYS}
        changed = [k for k in spec.FROZEN_KEYS if was[k] != spec.locked_value(lock, k)]
        guards = [k for k in changed if k in spec.GUARD_KEYS]
        if changed:  # a changed guard is named alone: guards decide what may be gated
            shown = guards or changed
            now = f", now {', '.join(repr(spec.locked_value(lock, k)) for k in guards)}" if guards else ""
            why = "a run's guards are frozen with it" if guards else "old rollouts would not be comparable"
            raise RunDirError(
                f"{spec.path}: {', '.join(shown)} changed since run {self.run_id} began "
                f"(was {', '.join(repr(was[k]) for k in shown)}{now}): {why}. Restore it, or start "
                "a new run with --capevolve-new-run"
            )
        moved = {k: lock[k] for k in lock if old.get(k) != lock[k]}
        if moved:
            self._write_spec_lock(lock, spec)
            self.log.append_event(SPEC_CHANGED, changed=sorted(moved))

    def _check_frozen(self, locked: dict[str, Any], spec: Spec) -> None:
        """Refuse a ``spec.lock.yaml`` whose frozen keys are not what ``run_created`` logged: the
        file edited in step with the spec would unfreeze a guard (or the shared ledger) unsaid."""
        created = self.log.of_kinds(RUN_CREATED)
        frozen = created[0].get("frozen") if created else None
        if not isinstance(frozen, dict):
            return  # a run older than the field: the file is all there is to hold the spec to
        edited = [k for k in frozen if _canonical(spec.locked_value(locked, k)) != _canonical(frozen[k])]
        if edited:
            raise RunDirError(
                f"{self.spec_lock_path}: {', '.join(edited)} not what the run froze when it began "
                f"(event seq {created[0].get('seq')}: {', '.join(f'{k}: {frozen[k]!r}' for k in edited)}): "
                "edited. Restore it, or start a new run with --capevolve-new-run"
            )

    def _write_spec_lock(self, lock: dict[str, Any], spec: Spec) -> None:
        atomic_write_text(self.spec_lock_path, yaml.safe_dump(lock, sort_keys=True))
        budget = {key: getattr(spec, key) for key in BUDGET_KEYS}
        self.state.update_state(lambda s: s["budget"].update(budget))

    def splits(self) -> dict[str, Any] | None:
        """The frozen splits, or None before the first evaluation froze them."""
        return self._read_splits() if self.splits_path.is_file() else None

    def _read_splits(self) -> dict[str, Any]:
        splits = read_run_json(self.splits_path, "restore it, or start a new run with --capevolve-new-run")
        if not isinstance(splits, dict):
            raise RunDirError(
                f"{self.splits_path}: damaged, not a JSON object; restore it, or start a new run"
            )
        self._check_splits(splits)
        return splits

    def _check_splits(self, splits: dict[str, Any]) -> None:
        """Refuse a file that is not what its ``splits_frozen`` event froze (the sha256 of its ids):
        dropped val tasks or a test task moved into val are never gated on."""
        frozen = self.log.of_kinds(SPLITS_FROZEN)
        if not frozen:
            return  # a kill between the file and its event: nothing recorded to hold it to
        event = frozen[-1]
        try:
            intact = _ids_digest(splits) == event.get("ids_sha256")
        except (KeyError, TypeError):
            intact = False
        if not intact:
            raise RunDirError(
                f"{self.splits_path}: not the splits the run froze (event seq {event.get('seq')}): "
                "edited. Restore it, or start a new run with --capevolve-new-run"
            )

    def ensure_splits(self, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The frozen splits; computed and written only the first time, never changed after."""
        if self.splits_path.is_file():
            return self._read_splits()
        splits = compute()
        atomic_write_json(self.splits_path, splits)
        self.log.append_event(
            SPLITS_FROZEN,
            sizes={k: len(splits[k]) for k in ("train", "val", "test")},
            ids_sha256=_ids_digest(splits),
        )
        return splits

    # -- the loop: decisions, memory, work copies --------------------------------------------------

    def flush(self) -> None:
        """At a session's end: bring the log's views (spend, index) up to it, log the outcomes' digest."""
        self.rollouts.flush(leaving=True)

    def close_log(self) -> None:
        self.log.close_log()

    def decisions(self) -> list[dict[str, Any]]:
        """Every booked decision (``decision`` events), in the order booked."""
        return [e for e in self.log.events() if e.get("kind") == DECISION]

    def write_memory(self, ledger_markdown: str, rejected: list[dict[str, Any]]) -> None:
        """Rewrite the loop's memory: ``LEDGER.md`` and ``rejected.jsonl`` (views of the log)."""
        atomic_write_text(self.root / "LEDGER.md", ledger_markdown)
        atomic_write_text(self.root / "rejected.jsonl", jsonl_lines(rejected))

    def work_dir(self, tag: str) -> Path:
        """Where an optimizer edits candidate ``tag`` (a copy of its parent's snapshot)."""
        return self.root / "work" / check_tag(tag)

    def hill_climb_dir(self, tag: str | None = None) -> Path:
        """``hill_climb/`` (the loop's own files), or one iteration's folder in it."""
        base = self.root / "hill_climb"
        return base if tag is None else base / check_tag(tag)

    def journal_entry_path(self, tag: str) -> Path:
        """``journals/<tag>.md``: round ``tag``'s journal, frozen when decided (sha256 in its decision)."""
        return self.root / "journals" / f"{check_tag(tag)}.md"

    def merge_dir(self, tag: str) -> Path:
        """``merge/<tag>/``: the gate sessions' output of ``capevolve merge --integrate``."""
        return self.root / "merge" / check_tag(tag)


# characters JSON leaves as they are (ensure_ascii=False) that a line reader splits on
# (str.splitlines: NEL, the Unicode line and paragraph separators): a note holding one would
# read as a second, forged row of rejected.jsonl
_LINE_SPLITTERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def jsonl_lines(rows: Iterable[dict[str, Any]]) -> str:
    """One JSON object a line, each line break a reader could split on escaped."""
    out = []
    for row in rows:
        line = json.dumps(row, sort_keys=True, ensure_ascii=False)
        for raw, escape in _LINE_SPLITTERS.items():
            line = line.replace(raw, escape)
        out.append(line + "\n")
    return "".join(out)


def _ids_digest(splits: dict[str, Any]) -> str:
    """sha256 of the three splits' ids, canonical JSON: what ``splits_frozen`` holds the file to."""
    ids = {k: list(splits[k]) for k in ("train", "val", "test")}
    return hashlib.sha256(json.dumps(ids, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


_LOCK_DELETED = (
    "run {run}: its spec.lock.yaml is gone but its event log records the run, so nothing it decided "
    "can be continued (restore the file from a backup, or start a new run with --capevolve-new-run)"
)


def _refuse_pre_release(path: Path, locked: dict[str, Any]) -> None:
    """Refuse a ``spec.lock.yaml`` not in today's format (the one check for a pre-release run dir)."""
    missing = [key for key in GUARD_KEYS if key not in locked]
    why = f"it has no {', '.join(missing)}" if missing else None
    if isinstance(where := locked.get("project_dir"), str) and Path(where).is_absolute():
        why = "its paths are absolute"
    if why is not None:
        raise RunDirError(
            f"{path}: written by a development build before pytest-capevolve 0.1.0 ({why}), a run-dir "
            "format this version does not read; start a new run with --capevolve-new-run"
        )


def _lock_deleted(root: Path) -> bool:
    """The log records ``run_created`` but the spec lock is gone (deleted by hand): never a run to
    start afresh in, nor one to pass over for an older run."""
    events = root / "events.jsonl"
    if (root / "spec.lock.yaml").is_file() or not events.is_file():
        return False
    try:
        with open(events, "rb") as handle:
            return f'"kind": "{RUN_CREATED}"'.encode() in handle.read(65536)
    except OSError:
        return False


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
