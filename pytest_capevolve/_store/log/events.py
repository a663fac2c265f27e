"""``events.jsonl``: the run's append-only log, each line chained to the one before by its hash.

Each line carries ``seq`` and ``prev`` (the sha256 of the line before), so an edited, removed or
reordered line shows in :func:`.event_chain.verify_events`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, overload

from ..files import FILE_MODE, KeptFd, RunDirError, atomic_write_text, loads_bytes, stat_or_none
from .event_chain import GENESIS, event_line_hash, line_seq, prev_of, verify_events
from .event_kinds import EVENTS_REPAIRED, ROLLOUT, E, Kind, check

SPEND_FLUSH_EVERY = 1000  # rollouts between rewrites of the log's views (state.json, the index)

_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)  # what json.dumps would build per call
_FLAT_ENCODER = json.JSONEncoder(ensure_ascii=False)  # for an event already sorted with no nesting
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
# Events this process appended, held so that readers catching up at each flush need not decode
# the lines it just wrote: at least APPENDED_HELD, at most + APPENDED_DROPPED (~1.2 MB).
APPENDED_HELD = SPEND_FLUSH_EVERY + 100
APPENDED_DROPPED = 256
_SCALARS = frozenset({str, int, float, bool, type(None)})
_SCAN_BLOCK = 1 << 20  # bytes of the log :meth:`EventLog.of_kinds` holds at a time
_NOT_A_ROLLOUT = re.compile(rb'"kind": "(?!rollout")')  # every line's kind but the 60,000 rollouts'


@dataclass
class _Appended:
    """The events this process appended last, with no other writer between."""

    start: int
    first_seq: int
    ends: list[int] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    lines: bytearray = field(default_factory=bytearray)

    @property
    def end(self) -> int:
        return self.ends[-1] if self.ends else self.start

    def add(self, event: dict[str, Any], line: bytes) -> None:
        """Hold ``event`` as a reader decoding ``line`` gets it (the caller decodes a nested one)."""
        self.lines += line
        self.ends.append(self.end + len(line))
        self.events.append(event)
        if len(self.events) > APPENDED_HELD + APPENDED_DROPPED:  # the oldest go: read from the file
            cut = APPENDED_DROPPED
            start = self.ends[cut - 1]
            del self.lines[: start - self.start]
            self.start, self.first_seq = start, self.first_seq + cut
            del self.ends[:cut], self.events[:cut]

    def continued_by(self, start: int, seq: int) -> bool:
        """Would event ``seq`` whose line starts at ``start`` follow the last one held?"""
        return self.end == start and self.first_seq + len(self.events) == seq

    def after(self, offset: int, seq: int) -> int | None:
        """The index of the first held event after event ``seq`` ending at ``offset``, or None."""
        index = seq - self.first_seq + 1
        if not 0 <= index < len(self.events):
            return None
        return index if (self.ends[index - 1] if index else self.start) == offset else None


_Hit = tuple[dict[str, Any], bool]  # an event found, and whether the next line's hash link holds it
# events path → its state and every line but the rollouts' at the last pass (EventLog._not_rollouts)
_KEPT: dict[str, tuple[tuple[int, int, int, int], list[_Hit]]] = {}


def _carry_on(path: str, before: os.stat_result | None, fd: int, event: dict[str, Any]) -> None:
    """Keep a pass kept over ``path`` as it was (``before``, under the lock) current with ``event``."""
    kept = _KEPT.get(path)
    if kept is not None and before is not None and kept[0] == _state(before):
        hits = kept[1] if event.get("kind") == ROLLOUT else [*kept[1], (dict(event), True)]
        _KEPT[path] = (_state(os.fstat(fd)), hits)


def _state(stat: os.stat_result) -> tuple[int, int, int, int]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _read_before(handle: BinaryIO, offset: int) -> bytes:
    """The last 64 KiB before ``offset``, or all of it when they hold no whole line; then at ``offset``."""
    start = max(0, offset - 65536)
    handle.seek(start)
    before = handle.read(offset - start)
    if start and before.count(b"\n") < 2:  # a line longer than the window: read it all
        handle.seek(0)
        before = handle.read(offset)
    return before


class EventLog:
    """The run's log (``run.log``); controller only, appends under the run's ``lock``."""

    def __init__(self, events_path: Path, lock: Callable[[], AbstractContextManager[None]]) -> None:
        self.events_path = events_path
        self.lock = lock
        self._event_tail: tuple[int, str, int] | None = None  # (file size, last hash, last seq)
        self._appender: KeptFd | None = None  # the log's O_APPEND descriptor
        self._appended: _Appended | None = None
        # kinds asked with ``rollout`` -> (size, mtime) and the events found (every other kind: _KEPT)
        self._kinds_cache: dict[tuple[str, ...], tuple[tuple[int, int], list[_Hit]]] = {}

    def tail(self) -> tuple[int, str, int]:
        """(size, hash of the last line, its seq): where a view of the log is current to."""
        return self._event_tail_at(stat_or_none(self.events_path))

    def last_seq(self) -> int:
        """The seq of the last event (right after an append: without a stat of the file)."""
        return self._event_tail[2] if self._event_tail is not None else self.tail()[2]

    def append_event(self, kind: Kind[Any], **fields: Any) -> None:
        """Append one chained line; a kind or field :mod:`.event_kinds` does not declare is refused first."""
        check(kind, fields)
        with self.lock():
            stat = stat_or_none(self.events_path)
            size, prev, seq = self._event_tail_at(stat)
            event = {"seq": seq + 1, "ts": round(time.time(), 3), "kind": str(kind), **fields}
            event["prev"] = prev
            flat = _SCALARS.issuperset(map(type, event.values()))  # no generator per field
            if flat:  # (a rollout's event) sorted once, here: the same line the sorting encoder writes
                event = dict(sorted(event.items()))
                line = _FLAT_ENCODER.encode(event)
            else:
                line = _ENCODER.encode(event)
            data = line.encode("utf-8")
            out = data + b"\n"
            # one write(2) of the whole line on an O_APPEND descriptor (no buffered text file
            # object per event): a line is never interleaved with another writer's
            fd = self._append_fd(stat)
            try:
                written = os.write(fd, out)
                while written < len(out):  # as a buffered file would: finish the line
                    written += os.write(fd, out[written:])
            except OSError:
                # a full disk tore the line: cut it off (a truncate needs no room), so the log
                # ends with its last whole event and the next append chains to it
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
            self._event_tail = (size + len(out), hashlib.sha256(data).hexdigest(), seq + 1)
            appended = self._appended
            if appended is None or not appended.continued_by(size, seq + 1):
                appended = self._appended = _Appended(size, seq + 1)  # another writer came between
            event = event if flat else json.loads(data)
            appended.add(event, out)
            _carry_on(str(self.events_path), stat, fd, event)

    def _append_fd(self, stat: os.stat_result | None) -> int:
        """The kept append descriptor, reopened if the path now names another file (a repair) or
        this is a forked child."""
        if self._appender is not None:
            if self._appender.names(stat):
                return self._appender.fd
            self._appender.close()
        self._appender = KeptFd(os.open(self.events_path, _APPEND_FLAGS, FILE_MODE))
        return self._appender.fd

    def close_log(self) -> None:
        """Let go of the kept descriptors (the log's and the lock's) and of the events held."""
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        self._appended = None
        close_lock = getattr(self.lock, "close", None)
        if close_lock is not None:
            close_lock()

    def _event_tail_at(self, stat: os.stat_result | None) -> tuple[int, str, int]:
        if stat is None:
            return (0, GENESIS, 0)
        size = stat.st_size
        if self._event_tail is not None and self._event_tail[0] == size:
            return self._event_tail
        with open(self.events_path, "rb") as handle:
            tail = _read_before(handle, size)
        lines = [ln for ln in tail.decode("utf-8", "replace").split("\n") if ln.strip()]
        if not lines:
            return (size, GENESIS, 0)
        last = lines[-1]
        seq = line_seq(last)
        if seq is None:
            number = len(self.events_path.read_bytes().rstrip(b"\n").split(b"\n"))
            raise self._damaged(number)
        return (size, event_line_hash(last), seq)

    @overload
    def of_kinds(self, kind: Kind[E], /) -> list[E]: ...
    @overload
    def of_kinds(self, *kinds: Kind[Any]) -> list[dict[str, Any]]: ...
    def of_kinds(self, *kinds: Kind[Any]) -> list[Any]:
        """Every event of ``kinds``, in log order, found by their bytes (``"kind": "<kind>"``) so
        that the 60,000 rollout lines are not decoded. Each is checked against the next line's
        ``prev``: a line edited after it was written raises RunDirError here, not only in verify."""
        stat = stat_or_none(self.events_path)
        if stat is None:
            return []
        if ROLLOUT in kinds:
            key = (stat.st_size, stat.st_mtime_ns)
            cached = self._kinds_cache.get(kinds)
            if cached is None or cached[0] != key:
                needles = (re.escape(b'"kind": ' + json.dumps(k, ensure_ascii=False).encode()) for k in kinds)
                cached = (key, self._scan(re.compile(b"|".join(needles)), set(kinds)))
                self._kinds_cache[kinds] = cached
            scanned = cached[1]
        else:
            scanned = self._not_rollouts(stat)
        found = [hit for hit in scanned if hit[0].get("kind") in kinds]
        edited = next((event for event, intact in found if not intact), None)
        if edited is not None:
            raise RunDirError(
                f"{self.events_path}: the {edited.get('kind')} event seq {edited.get('seq')} was edited "
                "after it was written (the next line's hash link breaks); run `capevolve verify`"
            )
        return [event for event, _ in found]

    def _not_rollouts(self, stat: os.stat_result) -> list[_Hit]:
        """Every line but the rollouts', from the process's last pass while the file is unchanged."""
        kept = _KEPT.pop(str(self.events_path), None)
        if kept is None or kept[0] != _state(stat):
            kept = (_state(stat), self._scan(_NOT_A_ROLLOUT, None))
        _KEPT[str(self.events_path)] = kept  # the most recent last
        if len(_KEPT) > 8:  # the logs read most recently
            del _KEPT[next(iter(_KEPT))]
        return kept[1]

    def _scan(self, pattern: re.Pattern[bytes], kinds: set[str] | None) -> list[_Hit]:
        """The events ``pattern`` finds of ``kinds`` (None: any but rollout), each with its link's state."""
        hits: list[_Hit] = []
        # a block at a time, never the whole log: each block is searched up to the start of its
        # last complete line, so every line searched has the line after it (its hash link)
        with open(self.events_path, "rb") as handle:
            carry = b""
            while True:
                chunk = handle.read(_SCAN_BLOCK)
                block = carry + chunk
                if not chunk:  # the end: what is left is searched as the whole file would be
                    self._kinds_in(block, len(block), pattern, kinds, hits)
                    return hits
                last = block.rfind(b"\n")
                cut = block.rfind(b"\n", 0, last) + 1 if last > 0 else 0
                if cut:
                    self._kinds_in(block, cut, pattern, kinds, hits)
                carry = block[cut:]

    def _kinds_in(
        self, data: bytes, limit: int, pattern: re.Pattern[bytes], kinds: set[str] | None, hits: list[_Hit]
    ) -> None:
        found = pattern.search(data, 0, limit)
        while found is not None:
            at = found.start()
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end == -1 else end
            try:
                line = data[start:end].decode("utf-8")
                event = json.loads(line)
            except ValueError:
                if end == len(data):  # the last line, its "\n" not written yet: not an event yet
                    return
                raise self._damaged(None) from None
            kind = event.get("kind") if isinstance(event, dict) else None
            # not a mention inside a value
            if isinstance(kind, str) and (kind in kinds if kinds is not None else kind != ROLLOUT):
                # the line after, once whole: one still being written links nothing yet
                after = data.find(b"\n", end + 1) if end < len(data) else -1
                following = data[end + 1 : after] if after != -1 else b""
                intact = not following.strip() or prev_of(following) == event_line_hash(line)
                hits.append((event, intact))
            found = pattern.search(data, end, limit)

    def linked(self, event: dict[str, Any]) -> bool:
        """Whether the chain covers the checkpoint ``event`` where it says it is (byte ``offset``,
        after event ``upto``), with a line after it recording its hash. A checkpoint copied later
        in the log, a line that does not chain, or the last line (no line holds it) is not."""
        offset, upto, seq = event.get("offset"), event.get("upto"), event.get("seq")
        if not (type(offset) is int and type(upto) is int and type(seq) is int):
            return False
        if seq != upto + 1 or offset < 0:
            return False
        try:
            with open(self.events_path, "rb") as handle:
                before = _read_before(handle, offset)
                line = handle.readline()
                following = handle.readline()
        except OSError:
            return False
        whole = line.endswith(b"\n") and following.endswith(b"\n")
        if (offset and not before.endswith(b"\n")) or not whole:
            return False
        if prev_of(following) != hashlib.sha256(line[:-1]).hexdigest():  # no line records its hash
            return False
        try:
            if json.loads(line) != event:
                return False
        except ValueError:
            return False
        previous = before[:-1].rsplit(b"\n", 1)[-1] if offset else None
        want = GENESIS if previous is None else hashlib.sha256(previous).hexdigest()
        return event.get("prev") == want

    def events_after(
        self, offset: int, seq: int, view: Callable[[dict[str, Any]], Any] | None = None
    ) -> tuple[list[Any], int, int] | None:
        """(events, end offset, last seq) appended after event ``seq`` ending at byte ``offset``;
        None when the log no longer continues from there or a line is not an event. ``view`` maps
        each event to what is held, so a long tail of rollouts is folded as read."""
        try:
            size = self.events_path.stat().st_size
        except FileNotFoundError:
            return ([], 0, 0) if (offset, seq) == (0, 0) else None
        if size < offset:
            return None
        if size == offset:
            return [], offset, seq
        events: list[Any] = []
        end = offset
        with open(self.events_path, "rb") as handle:
            handle.seek(offset)
            held = self._appended_after(handle, offset, seq, size, view)
            if held is not None:
                return held
            appended = self._appended  # read up to the lines this process appended, then those
            joins = (appended.start, appended.first_seq - 1) if appended and appended.end == size else None
            for line in handle:
                # a last line without its newline is still being written; the stat bounds what
                # is read to the log as it was when this call began
                if not line.endswith(b"\n") or end + len(line) > size:
                    break
                if (end, seq) == joins:
                    handle.seek(end)
                    held = self._appended_after(handle, end, seq, size, view)
                    if held is not None:
                        return events + held[0], held[1], held[2]
                    handle.seek(end + len(line))  # not those lines after all: on through the file
                try:
                    event = loads_bytes(line)
                    if int(event["seq"]) != seq + 1:
                        return None
                except (ValueError, KeyError, TypeError):
                    return None
                seq += 1
                end += len(line)
                held = event if view is None else view(event)
                if held is not None:
                    events.append(held)
        return events, end, seq

    def _appended_after(
        self, handle: Any, offset: int, seq: int, size: int, view: Callable[[dict[str, Any]], Any] | None
    ) -> tuple[list[Any], int, int] | None:
        """:meth:`events_after` from the events held, when the file from ``offset`` is byte for
        byte what this process wrote (compared, not decoded); None: the caller reads the file."""
        appended = self._appended
        index = None if appended is None or appended.end != size else appended.after(offset, seq)
        if appended is None or index is None:
            return None
        held_from = offset - appended.start
        if handle.read(size - offset) != appended.lines[held_from:]:
            handle.seek(offset)
            return None
        held = (dict(event) if view is None else view(dict(event)) for event in appended.events[index:])
        events = [kept for kept in held if kept is not None]
        return events, size, appended.first_seq + len(appended.events) - 1

    def _damaged(self, number: int | None) -> RunDirError:
        return RunDirError(
            f"{self.events_path}: {'a line' if number is None else f'line {number}'} is not an event "
            f"(unreadable JSON or no seq); `capevolve verify --repair {self.events_path.parent}` moves "
            "the damaged lines aside"
        )

    def events(self) -> list[dict[str, Any]]:
        """Every event, oldest first; a line that is not one raises :class:`RunDirError`."""
        if not self.events_path.is_file():
            return []
        events = []
        text = self.events_path.read_text(encoding="utf-8", errors="replace")
        # lines are "\n"-ended: str.splitlines would also split inside a value holding U+2028,
        # U+2029 or U+0085 (JSON leaves them as they are), and one note would brick the log
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                raise self._damaged(number)
            events.append(event)
        return events

    def repair_events(self) -> int:
        """Move a damaged tail (a torn write, garbage) to ``events.jsonl.damaged-<time>``; returns
        how many lines moved. An edited or reordered line is history, not damage: refused."""
        with self.lock():
            count, problem = verify_events(self.events_path)
            if problem is None:
                return 0
            lines = self.events_path.read_text(encoding="utf-8", errors="replace").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            tail = lines[count:]
            if any(line_seq(line) is not None for line in tail):
                raise RunDirError(
                    f"{self.events_path}: {problem}; the chain was edited, not torn, so it is not "
                    "repaired automatically (restore the file from a backup, or start a new run)"
                )
            aside = self.events_path.with_name(
                f"{self.events_path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
            )
            aside.write_text("\n".join(tail) + "\n", encoding="utf-8")
            atomic_write_text(self.events_path, "".join(line + "\n" for line in lines[:count]))
            self._event_tail = None
            self._appended = None
            self.append_event(EVENTS_REPAIRED, moved=len(tail), to=aside.name, problem=problem)
            return len(tail)
