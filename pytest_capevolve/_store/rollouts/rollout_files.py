"""Rollout files: ``rollouts/<split>/<task>__<name>.json`` (``<name>`` from the run's secret:
``RunDir.rollout_path``), written once, read back checked.

A damaged file is quarantined and a recorded file that is gone is logged as ``rollout_vanished``:
either counts as missing, so the next session pays it again. Persisting a rollout is one step under
one lock: the file, then its ``rollout`` event, which carries the cost and the file's sha256.

A new file is written once under its final name (created exclusively, no temp file and rename); one
that exists (a rollout paid again) is replaced atomically, so a recorded file is never torn. A crash
while a new file is written leaves it partial and no event records it: read back, it is not the log's
(no event, or bytes not its sha256), so it is quarantined and the rollout owed again."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, TypeVar

from ..._project.blocks import first_trial
from ..._project.splits import TEST_SPLIT, TestSealError
from ..decisions.state import SPEND_FLUSH_EVERY, RunState
from ..files import RunDirError, atomic_write_text, write_new_text
from ..log.event_kinds import ROLLOUT, SESSION_LEFT
from ..log.events import EventLog
from ..log.outcome_ledger import Key, Outcome, OutcomeLedger, outcome
from ..log.sealed_summary import SUMMARIZED_SPLITS, SealedSummary
from ..sessions.claims import Claims
from .index import FIELDS as FIELDS_INDEX
from .index import Columns, IndexDamaged, RolloutIndex, Row, record_of, row_of
from .index_sync import IndexView, log_vanished
from .record import RolloutRecord
from .rollout_readback import LoggedDigests, RolloutReadBack


class RolloutFiles(RolloutReadBack):
    """The run's rollout records and their index (``run.rollouts`` of :class:`..rundir.RunDir`)."""

    def __init__(
        self,
        root: Path,
        run_id: str,
        log: EventLog,
        state: RunState,
        index: RolloutIndex,
        rollout_path: Callable[[str, str, str, int], Path],
        notices: list[str],
        claims: Claims | None = None,
    ) -> None:
        self.claims = claims  # whose claim this process's rollout events name (:mod:`..log.paid_by`)
        self.root = root
        self.run_id = run_id
        self.log = log
        self.lock = log.lock
        self.state = state
        self.index = index
        self.rollout_path = rollout_path
        self.notices = notices
        self.index_view = IndexView(root, log, index, rollout_path, notices, self._read_files)
        self.ledger = OutcomeLedger(log, self._file_of)
        self.digests = LoggedDigests(log)  # learnt only when a file is read again
        self.summary = SealedSummary(root, log)  # what a resume with nothing owed reads instead
        self._unflushed = 0
        # split → the rows checked at an index version: a session reading its split again with
        # nothing changed in between is not charged the checks twice
        self._checked: dict[str, _Checked] = {}
        # the sealed summary's columns, and what each indexed_columns ask picked of them
        self._served_columns: tuple[list[list[Any]], dict[Any, Columns]] | None = None

    def _write_rollout(self, record: RolloutRecord, text: str | None) -> tuple[Path, os.stat_result, str]:
        """The file written, its stat, and the sha256 of its bytes (what its event records)."""
        path = self.rollout_path(record.split, record.task_id, record.tag, record.trial)
        content = (record.dumps() if text is None else text) + "\n"
        stat = write_new_text(path, content)
        if stat is None:  # paid again (a rerun, a redraw): the recorded file is replaced whole or not at all
            try:
                stat = atomic_write_text(path, content)
            except IsADirectoryError:  # a folder planted under its name: moved aside, not this rollout's loss
                self.quarantine(path, "a folder, not a rollout file")
                stat = atomic_write_text(path, content)
        return path, stat, hashlib.sha256(content.encode("utf-8")).hexdigest()

    def _file_of(self, split: str, task_id: str, tag: str, trial: int) -> str:
        return f"rollouts/{split}/{self.rollout_path(split, task_id, tag, trial).name}"

    def record_rollout(self, record: RolloutRecord, text: str | None = None) -> Path:
        """Persist one rollout under one lock: its file (``text``, as it arrived), then its event."""
        with self.lock():
            path, stat, sha256 = self._write_rollout(record, text)
            self.log.append_event(
                ROLLOUT,
                split=record.split,
                task_id=record.task_id,
                tag=record.tag,
                trial=record.trial,
                reward=record.reward,
                infra_error=record.infra_error,
                cost_usd=record.cost_usd,
                sha256=sha256,
                claim=None if self.claims is None else self.claims.claim_id,
            )
            if record.split != TEST_SPLIT:
                seq = self.log.last_seq()
                self.index.pending[seq] = row_of(record, path, stat)
            self._unflushed += 1
            if self._unflushed >= SPEND_FLUSH_EVERY:
                self.flush()
        return path

    def flush(self, *, leaving: bool = False) -> None:
        """Bring ``state.json``'s spend and the index up to the log (nothing is lost if this never
        runs); ``leaving``: also log the outcomes' digest, so the next process checks in one pass."""
        with self.lock():
            self._unflushed = 0
            # the state last: the index's catch-up may log a vanished file, and the state written
            # after it is current to where the checkpoint below is (its tally then serves)
            for view in (self.index_view, self.state):
                view.catch_up()
            if leaving:
                if self.ledger.checkpoint(also=self.state.checkpoint_fields):
                    # a line after the checkpoint records its hash: the chain covers it, so the
                    # next reader may start from it (the log's last line no line holds)
                    self.log.append_event(SESSION_LEFT, checkpoint=self.log.last_seq())

    # -- the index ---------------------------------------------------------------------------

    def indexed_rollouts(
        self, split: str, tags: Iterable[str] | None = None, block: int | None = 0
    ) -> list[RolloutRecord]:
        """What :meth:`rollouts` answers, from the checked index: outcome fields only."""
        return _in_block(self._indexed(split, tags)[1](), block, attrgetter("trial"))

    def indexed_rows(self, split: str, tags: Iterable[str] | None = None, block: int | None = 0) -> list[Row]:
        """:meth:`indexed_rollouts` as the index's rows (no record object per rollout)."""
        return _in_block(self._indexed(split, tags)[0], block, _row_trial)

    def indexed_columns(
        self, split: str, tags: Iterable[str] | None = None, block: int | None = 0
    ) -> Columns:
        """:meth:`indexed_rows` as :class:`.index.Columns`, made once per check."""
        tags = None if tags is None else frozenset(tags)
        served = None if split == TEST_SPLIT else self.summary.columns()
        if served is not None:  # bound to the log by its chained line, as for :meth:`_summarized`
            return self._summarized_columns(split, tags, block, served[1])
        rows, _, checked = self._indexed(split, tags)
        key = (tags, block)
        made = None if checked is None else checked.columns.get(key)
        if made is None:
            made = Columns(_in_block(rows, block, _row_trial))
            if checked is not None:
                checked.columns[key] = made
        return made

    def _indexed(
        self, split: str, tags: Iterable[str] | None
    ) -> tuple[list[Row], Callable[[], list[RolloutRecord]], _Checked | None]:
        """The checked rows, their records on first ask, and the check (None: the files were read)."""
        if split == TEST_SPLIT:
            self.rollouts(split)  # raises: only the seal reads test
        wanted = None if tags is None else set(tags)
        served = self.summary.rows()
        if served is not None:  # bound to the log by its chained line; no rollout moved since
            return self._summarized(split, wanted, *served)
        try:
            with self.lock():
                self.index_view.sync()
                truth = self._truth()
            # a check of tags T at a version leaves no unknown file of any tag (it indexes them),
            # so it answers any later ask for tags within T — "every tag" included — at that version
            asked = frozenset(self.index.tags(split) if wanted is None else wanted)
            cached = self._checked.get(split)
            if cached is None or cached.version != self.index.rows_version() or not asked <= cached.asked:
                rows = self._checked_rows(split, wanted, truth)
                cached = _Checked(self.index.rows_version(), asked, rows)
                self._checked = {split: cached}
            return (*cached.of(asked), cached)
        except (IndexDamaged, OSError) as exc:  # could not even rebuild it (e.g. a read-only run dir)
            self.notices.append(f"{self.index.path}: unusable ({exc}); read the rollout files instead")
            self.index.close()
            records = [r for r in self._read_rollouts(split) if wanted is None or r.tag in wanted]
            return [row_of(r) for r in records], lambda: list(records), None

    def _summarized_columns(
        self, split: str, tags: frozenset[str] | None, block: int | None, columns: list[list[Any]]
    ) -> Columns:
        """:meth:`indexed_columns` from the sealed summary's columns: the rows :meth:`_summarized` and
        :func:`_in_block` keep, in their order, picked by place (no row made; none picked when all are)."""
        key = (split, tags, block)
        cached = self._served_columns
        if cached is not None and cached[0] is columns and key in cached[1]:
            return cached[1][key]
        if not columns:  # a summary of no row
            return Columns([])
        splits, tags_of, trials = columns[FIELDS_INDEX.index("split")], columns[_TAG], columns[_TRIAL]
        low, high = (0, 0) if block is None else (first_trial(block), first_trial(block + 1))
        at: list[int] | None = None
        if not (
            splits.count(split) == len(splits)
            and (tags is None or tags.issuperset(tags_of))
            and (block is None or not trials or low <= min(trials) and max(trials) < high)
        ):
            at = [
                i
                for i, (s, tag, k) in enumerate(zip(splits, tags_of, trials, strict=True))
                if s == split and (tags is None or tag in tags) and (block is None or low <= k < high)
            ]
        if cached is None or cached[0] is not columns:
            cached = self._served_columns = (columns, {})
        made = cached[1][key] = Columns.picked(columns, at)
        return made

    def _summarized(
        self, split: str, wanted: set[str] | None, version: str, every: list[Row]
    ) -> tuple[list[Row], Callable[[], list[RolloutRecord]], _Checked]:
        """:meth:`_indexed` from the sealed summary's rows (their own version: never the index's)."""
        asked = frozenset({row[1] for row in every if row[0] == split} if wanted is None else wanted)
        version = f"summary:{version}"
        cached = self._checked.get(split)
        if cached is None or cached.version != version or not asked <= cached.asked:
            rows = [row for row in every if row[0] == split and (wanted is None or row[1] in wanted)]
            cached = _Checked(version, asked, rows)
            self._checked = {split: cached}
        return (*cached.of(asked), cached)

    def seal_summary(self) -> None:
        """As the record keeper leaves, after its last rollout append: the sealed summary of every train
        and val row (:mod:`..log.sealed_summary`), unless the one there still holds (and holds every leak
        screen this session found clean). Written under the
        lock, and only when every row is just then its file's size and mtime, no other file is in its
        folder, and the rows are every outcome the log holds; anything else (a file to read again, a
        file gone) and none is written, nothing is moved: the next session takes the full path and
        does what it always did. The folders are stamped before that check, so a file deleted or
        renamed over during it is seen too."""
        try:
            if self.summary.rows() is not None and not self.summary.screens_to_seal():
                return
            with self.lock():
                stamps = self.summary.stamps()
                self.index_view.sync()
                truth = self._truth()
                version = self.index.rows_version()
                every = self.index.every()
                if len(every) != len(truth) or not all(self._unmoved(split) for split in SUMMARIZED_SPLITS):
                    return
                if not self.ledger.mirrors(truth, every) and any(
                    truth.get((row[0], row[_TAG], row[_TASK], row[_TRIAL]))
                    != outcome(row[_REWARD], row[_INFRA], row[_COST])
                    for row in every
                ):
                    return
                self.summary.write(every, version, stamps)
        except (IndexDamaged, OSError, RunDirError):  # a shortcut: without it, the full path
            return

    def _unmoved(self, split: str) -> bool:
        """Whether each of the split's rows names a file of its size and mtime and no other file is in
        its folder: what :meth:`_checked_rows` passes without reading a file (nothing is moved here)."""
        rows = self.index.rows(split)
        folder = self.root / "rollouts" / split
        try:
            on_disk = sum(1 for name in os.listdir(folder) if name.endswith(".json"))
            folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return not rows
        name_at = len(FIELDS_INDEX)
        try:
            for row in rows:  # names are unique (one file per key): as many as on disk is all of them
                found = os.stat(row[name_at], dir_fd=folder_fd)
                if found.st_size != row[name_at + 1] or found.st_mtime_ns != row[name_at + 2]:
                    return False
        except FileNotFoundError:
            return False
        finally:
            os.close(folder_fd)
        return on_disk == len(rows)

    def _checked_rows(
        self, split: str, wanted: set[str] | None, truth: dict[Key, Outcome] | None = None
    ) -> list[Row]:
        """The split's rows, each held to the log's outcome and its file's size and mtime; a file that
        differs, or no row knows, is read again (and quarantined if it differs from the log). An edit
        that restores both (``os.utime``) is found by ``capevolve verify``, which hashes every file."""
        if truth is None:
            with self.lock():
                truth = self._truth()
        folder = self.root / "rollouts" / split
        try:
            on_disk = {name for name in os.listdir(folder) if name.endswith(".json")}
        except FileNotFoundError:
            on_disk = set()
        rows: list[Row] = []
        recheck: list[str] = []
        vanished: list[tuple[str, str]] = []
        name_at = len(FIELDS_INDEX)
        size_at, mtime_at = name_at + 1, name_at + 2
        # each file by its name relative to the open folder: the kernel walks the run dir's
        # path once, not once per file (measured 15-45 % less per check at 60,000)
        try:
            folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            folder_fd = None  # no folder: every row's file is gone
        try:
            stat = os.stat
            rows_of_split = self.index.rows(split, wanted)
            # a truth built from these very rows (against the log's checkpoint; every() returns one
            # list per rows_version, never an older one again) holds each row's outcome as it is
            mirrored = self.ledger.mirrors(truth, self.index.every())
            for row in rows_of_split:
                name = row[name_at]
                try:
                    if folder_fd is None:
                        raise FileNotFoundError(name)
                    found = stat(name, dir_fd=folder_fd)
                except FileNotFoundError:
                    vanished.append((split, name))
                    continue
                if (
                    found.st_size != row[size_at]
                    or found.st_mtime_ns != row[mtime_at]
                    or (
                        not mirrored
                        and truth.get((split, row[_TAG], row[_TASK], row[_TRIAL]))
                        != outcome(row[_REWARD], row[_INFRA], row[_COST])
                    )
                ):
                    recheck.append(name)
                    continue
                rows.append(row)
        finally:
            if folder_fd is not None:
                os.close(folder_fd)
        if vanished or len(on_disk) != len(self.index.rows(split)):
            known = {row[-3] for row in self.index.rows(split)}
            recheck += [name for name in on_disk if name not in known]
        if not (recheck or vanished):
            return rows
        upserts: list[Row] = []
        with self.lock():
            digests = self.digests.current()
        for name in recheck:
            path = folder / name
            read = self._read_one(path, truth, digests)
            if read is None:
                vanished.append((split, name))
                continue
            try:
                upserts.append(row_of(read, path, path.stat()))
            except FileNotFoundError:
                continue
            if wanted is None or read.tag in wanted:
                rows.append(upserts[-1])
        with self.lock():
            self.index.store(upserts, [], None)
            back = self._log_vanished(vanished)
        for path, read in back:  # not gone after all (written again meanwhile): answered
            if wanted is None or read.tag in wanted:
                rows.append(row_of(read, path, path.stat()))
        return rows

    def _log_vanished(self, candidates: list[tuple[str, str]]) -> list[tuple[Path, RolloutRecord]]:
        """Under the lock: rows whose file is still gone once the index caught up were deleted by hand:
        logged as ``rollout_vanished``. Those written again meanwhile are returned, read."""
        if not candidates:
            return []
        self.index_view.sync()  # another session's quarantine or re-pay since the check read the rows
        gone: list[str] = []
        back: list[tuple[Path, RolloutRecord]] = []
        indexed = {(row[0], row[-3]) for row in self.index.every()}  # (split, file name)
        for split, name in sorted(set(candidates) & indexed):
            path = self.root / "rollouts" / split / name
            if not path.exists():
                gone.append(f"rollouts/{split}/{name}")
                continue
            read = self._read_one(path)  # None: damaged, quarantined (logged) just now
            if read is not None:
                back.append((path, read))
        log_vanished(self.log, self.notices, gone)
        self.index_view.sync()  # their rows go with the event (and a quarantine's just now with its own)
        return back

    def rollouts(self, split: str, block: int | None = 0) -> list[RolloutRecord]:
        """Persisted rollouts of a split, of replicate block ``block`` (None: all); test is refused."""
        if split == TEST_SPLIT:
            raise TestSealError(
                f"run {self.run_id}: test rollouts are read only through the seal "
                "(pytest --capevolve-finalize, then capevolve measure)"
            )
        records = self._read_rollouts(split)
        return records if block is None else [r for r in records if r.block == block]

    def read_rollout(self, split: str, task_id: str, tag: str, trial: int) -> RolloutRecord | None:
        """One persisted rollout with every field (None: not persisted, or damaged or edited, quarantined)."""
        if split == TEST_SPLIT:
            self.rollouts(split)  # raises: only the seal reads test
        with self.lock():  # its bytes held to its event's sha256: a file edited in place is not used
            digests = self.digests.current()
        return self._read_one(self.rollout_path(split, task_id, tag, trial), None, digests)

    def _read_rollouts(self, split: str) -> list[RolloutRecord]:
        """Every readable record of the split (a damaged one quarantined)."""
        return [record for _, record in self._read_files(split)]

    def _read_files(self, split: str) -> list[tuple[Path, RolloutRecord]]:
        folder = self.root / "rollouts" / split
        found = []
        with self.lock():
            # train and val: outcomes held here; their other bytes by the one reader of them, the
            # judge (``_policy/gate/judge.py`` ``HeldToEvents``), which refuses rather than drops
            truth, digests = self._test_truth() if split == TEST_SPLIT else (self._truth(), None)
        for path in folder.glob("*.json"):
            record = self._read_one(path, truth, digests)
            if record is not None:
                found.append((path, record))
        # in the index's order within a tag (task, then trial): a sum over an arm's records is the
        # same to the bit as over its index rows (file names, from the secret, order nothing)
        found.sort(key=lambda item: (item[1].task_id, item[1].tag, item[1].trial))
        return found


_TRIAL = FIELDS_INDEX.index("trial")
_row_trial = itemgetter(_TRIAL)
T = TypeVar("T")


def _in_block(items: list[T], block: int | None, trial: Callable[[T], int]) -> list[T]:
    if block is None:
        return items
    low, high = first_trial(block), first_trial(block + 1)  # block_of(trial) == block, without a call each
    return [item for item in items if low <= trial(item) < high]


_TAG = FIELDS_INDEX.index("tag")
_TASK = FIELDS_INDEX.index("task_id")
_REWARD, _INFRA, _COST = (FIELDS_INDEX.index(name) for name in ("reward", "infra_error", "cost_usd"))


class _Checked:
    """One split's rows checked at one index version for the tags asked."""

    def __init__(self, version: str, asked: frozenset[str], rows: list[Row]) -> None:
        self.version = version
        self.asked = asked
        self.rows = rows
        self._records: list[RolloutRecord] | None = None
        self.columns: dict[Any, Columns] = {}  # (tags asked, block) → those rows as columns

    def of(self, asked: frozenset[str]) -> tuple[list[Row], Callable[[], list[RolloutRecord]]]:
        every = asked >= self.asked
        rows = list(self.rows) if every else [row for row in self.rows if row[_TAG] in asked]

        def records() -> list[RolloutRecord]:
            if self._records is None:
                self._records = [record_of(row) for row in self.rows]
            return list(self._records) if every else [r for r in self._records if r.tag in asked]

        return rows, records
