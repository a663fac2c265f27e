"""Which bytes a rollout runs with: the candidate's read-only snapshot, checked before and after;
and workers on a copy of the project.

A candidate is evaluated from its snapshot (``snapshots/<name>``, named from the run's secret),
never from the folder the optimizer may still be editing. The snapshot's hash and listing are
checked at first use; before and after every rollout a cheap stamp (sizes, inodes, times; a folder
listed again only when its own times moved) is compared, and a snapshot moved before or *during* a
rollout is re-checked (other bytes make it missing data). An unmoved stamp after one rollout is the
next one's before: a move in between is seen after it.

A worker on a copy of the project — another folder (``--tx popen//chdir=COPY``) or machine
(``--tx ssh=HOST//chdir=COPY``), in place of xdist's deprecated ``--rsyncdir`` — loads the spec
and adapter from its own folder; the plan still comes from the controller, and it evaluates a
private copy of each candidate, hashed after copying, so a stale copy is refused, never
mislabelled (:class:`RemoteWorkers`)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from .._project.candidate import CandidateError, compare_digests, content_hash, file_digests, iter_files
from .._project.spec import Spec
from .._project.way_on import VALUELESS
from .._store.snapshots import make_read_only, registered_files

Stamp = tuple[tuple[str, tuple[object, ...]], ...]
ORIGIN_KEY = "capevolve_origin"
# ends the refusal of a candidate whose bytes on a worker's copy differ from the controller's;
# the summary looks for it to advise re-copying before re-running
STALE_COPY_FIX = "copy the project again"


class CandidateMismatch(Exception):
    """The candidate's bytes here are not the registered ones: its rollouts are not run."""


@dataclass
class _Checked:
    folder: Path
    stamp: Stamp
    digest: str


# A folder whose times moved this lately is listed again, never trusted unmoved: its next change
# could fall in the same tick of the file system's clock and leave its times as they were. A tick
# is at most 10 ms on Linux (HZ >= 100); a file system keeping whole seconds (ext3, HFS+) gets 2 s.
SETTLED_NS = 100_000_000
SETTLED_WHOLE_SECONDS_NS = 2_000_000_000


def stamp_of(folder: Path, known: Stamp | None = None) -> Stamp:
    """What changes whenever a file under ``folder`` is written, replaced, added or removed
    (ctime cannot be set back), without reading a byte; a planted ``.pyc`` counts too. Plain
    ``os.scandir`` and strings: this runs once per rollout. ``known``, an earlier stamp of the
    same folder, spares the listings: adding, removing or renaming an entry moves the times of
    the folder holding it, so while no folder's times moved (and none moved lately:
    :data:`SETTLED_NS`) its files are stat'ed by name; else everything is listed again."""
    if known:
        again = _restamped(os.fspath(folder), known)
        if again is not None:
            return again
    entries: list[tuple[str, tuple[object, ...]]] = []
    todo = [("", os.fspath(folder))]
    while todo:
        relative, path = todo.pop()
        try:
            held = os.stat(path)  # before the listing: a change after it moves these times
            with os.scandir(path) as listing:
                found = sorted(listing, key=lambda e: e.name)
        except OSError:
            entries.append((relative + "/", ("gone",)))
            continue
        names = []
        for entry in found:
            name = entry.name
            names.append(name)
            inner = f"{relative}/{name}" if relative else name
            if entry.is_dir(follow_symlinks=False):
                todo.append((inner, entry.path))
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                entries.append((inner, ("gone",)))
                continue
            entries.append((inner, (st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)))
        times = (held.st_ino, held.st_mtime_ns, held.st_ctime_ns, held.st_mode)
        entries.append((relative + "/", (*times, *names)))
    return tuple(entries)


def _restamped(base: str, known: Stamp) -> Stamp | None:
    """:func:`stamp_of` ``base`` as ``known`` lists it, each entry stat'ed by name; None when a
    folder's times moved (or moved lately) or an entry is gone: then it is listed again."""
    now = time.time_ns()
    entries: list[tuple[str, tuple[object, ...]]] = []
    for inner, info in known:
        if info == ("gone",):
            return None
        folder = inner[-1:] == "/"  # a folder's entry (the root's is "/")
        name = inner[:-1] if folder else inner
        try:  # a folder as listed (through a link), anything else as itself
            st = (os.stat if folder else os.lstat)(f"{base}/{name}" if name else base)
        except OSError:
            return None
        if folder:  # its times; its names as listed
            changed = st.st_ctime_ns
            settled = SETTLED_NS if changed % 1_000_000_000 else SETTLED_WHOLE_SECONDS_NS
            if (st.st_ino, st.st_mtime_ns, changed, st.st_mode) != info[:4] or now - changed < settled:
                return None
            entries.append((inner, info))
        else:
            entries.append((inner, (st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)))
    return tuple(entries)


def moved(before: Stamp, after: Stamp) -> list[str]:
    """The entries whose stamp differs (``path/`` for a folder whose listing or times did)."""
    old, new = dict(before), dict(after)
    return sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))


def listed_files(folder: Path) -> set[str]:
    """Every file under ``folder``, handover files and bytecode included: in a snapshot nothing
    is left out, so a JOURNAL.md or a ``.pyc`` added to one is seen."""
    return {entry for entry, info in stamp_of(folder) if not entry.endswith("/") and info != ("gone",)}


class CandidateBytes:
    """Per process: each planned tag's folder, checked once in full and stamped per rollout."""

    def __init__(self, on_copy: bool) -> None:
        self.on_copy = on_copy
        self._checked: dict[str, _Checked | str] = {}
        self._private: Path | None = None
        self._unmoved: str | None = None  # the tag whose stamp after its last rollout was unmoved

    def folder(self, tag: str, snapshot: Path, source: Path, digest: str) -> tuple[Path, Stamp]:
        """The folder to evaluate ``tag`` from and its stamp now; raises CandidateMismatch
        (one line naming what differs) when its bytes are not the registered ``digest``."""
        checked = self._checked.get(tag)
        if checked is None:
            checked = self._checked[tag] = self._first_check(tag, snapshot, source, digest)
        elif isinstance(checked, _Checked) and self._unmoved != tag:
            now = stamp_of(checked.folder, checked.stamp)
            if now != checked.stamp:  # touched at least: the bytes are checked again
                checked = self._checked[tag] = self._verify(tag, checked.folder, digest, now)
        self._unmoved = None
        if isinstance(checked, str):
            raise CandidateMismatch(checked)
        return checked.folder, checked.stamp

    def changed_during(self, tag: str, folder: Path, before: Stamp) -> str | None:
        """After a rollout: None when ``folder`` is unmoved or (a touch, to have a failure paid again)
        still the registered bytes; else why the rollout is missing data (other bytes measured?)."""
        after = stamp_of(folder, before)
        checked = self._checked.get(tag)
        digest = checked.digest if isinstance(checked, _Checked) else ""
        unmoved = isinstance(checked, _Checked) and after == checked.stamp and folder == checked.folder
        self._unmoved = tag if unmoved else None
        if after == before or isinstance(self._verify(tag, folder, digest, after), _Checked):
            return None
        changed = ", ".join(moved(before, after)[:3])
        return (
            f"candidate {tag!r}: its snapshot {folder} changed while this rollout ran ({changed}); "
            "what the rollout measured is not the registered bytes, so it is missing data"
        )

    def _first_check(self, tag: str, snapshot: Path, source: Path, digest: str) -> _Checked | str:
        if not self.on_copy:
            if not snapshot.is_dir():
                return (
                    f"candidate {tag!r}: its snapshot {snapshot} is missing; a candidate is evaluated "
                    "from its snapshot only (restore the run dir, or start a new run)"
                )
            return self._verify(tag, snapshot, digest, stamp_of(snapshot))
        found = snapshot if snapshot.is_dir() else source
        try:
            private = self._private_copy(snapshot.name, found)
            actual = content_hash(private)
        except (OSError, CandidateError) as exc:
            actual = f"unreadable ({exc})"
        else:
            if actual == digest:
                return _Checked(private, stamp_of(private), digest)
        return (
            f"this worker's copy of tag {tag!r} at {found} differs from the controller's "
            f"(registered {digest}, the copy hashes to {actual}): {STALE_COPY_FIX}"
        )

    def _verify(self, tag: str, folder: Path, digest: str, stamp: Stamp) -> _Checked | str:
        try:
            actual = content_hash(folder)
            counted = {p.relative_to(folder.resolve()).as_posix() for p in iter_files(folder)}
        except (OSError, CandidateError) as exc:
            return f"candidate {tag!r}: its snapshot {folder} is unreadable ({exc}); it is not evaluated"
        extra = sorted(listed_files(folder) - counted)
        if actual == digest and not extra:
            return _Checked(folder, stamp, digest)
        what = [f"{p} (added)" for p in extra]
        if actual != digest:
            registered = registered_files(folder, tag)
            what += compare_digests(file_digests(folder), registered) if registered is not None else []
        named = ", ".join(f"{folder}/{w}" for w in what[:3]) or f"{folder} (hashes to {actual})"
        return (
            f"candidate {tag!r}: its snapshot changed after it was registered as {digest}: {named}; "
            "a snapshot is never edited, so it is not evaluated (start a new run with "
            "--capevolve-new-run, or register the new bytes under a new tag)"
        )

    def _private_copy(self, name: str, found: Path) -> Path:
        """``found``'s candidate files copied where nothing but this process writes, under its
        snapshot's ``name`` (never its tag: the folder a rollout runs from does not name it)."""
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="capevolve-worker-"))
            atexit.register(shutil.rmtree, self._private, ignore_errors=True)
        dest = self._private / name
        root = found.resolve()
        for path in iter_files(found):
            target = dest / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        dest.mkdir(parents=True, exist_ok=True)
        make_read_only(dest)
        return dest


class RemoteWorkers:
    """Registered on the controller of an xdist session: tells each worker where it came from."""

    def __init__(self, config: pytest.Config, spec: Spec) -> None:
        self.config = config
        self.spec = spec

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        if any(spec.chdir or not spec.popen for spec in specs):
            join_option_values(config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        origin = {"cwd": os.getcwd(), "project": self.spec.project_dir.name, "spec": self.spec.path.name}
        node.workerinput[ORIGIN_KEY] = json.dumps(origin)


def gateway_count(config: pytest.Config) -> int:
    """How many processes run rollouts: the xdist gateways (``-n N`` is N popen ones), else 1."""
    if config.getoption("dist", "no") == "no":
        return 1
    return max(1, sum(_gateways(raw) for raw in config.getoption("tx", None) or []))


def _gateways(raw: str) -> int:
    """How many gateways one ``--tx`` starts (``N*spec``: N)."""
    count, _, _ = raw.rpartition("*")
    return int(count) if count.isdigit() else 1


def check_gateways(config: pytest.Config, spec: Spec) -> None:
    """Before anything is planned, refuse a local gateway whose ``chdir`` holds no copy of the
    project (its workers would crash and be replaced forever); crashed remote workers are
    replaced at most 4 × gateways times (xdist's default for ``-n``)."""
    gateways = 0
    for raw in config.getoption("tx", None) or []:
        gateways += _gateways(raw)
        options = dict(part.partition("=")[::2] for part in raw.rpartition("*")[2].split("//"))
        if "popen" in options and options.get("chdir"):
            folder = Path(options["chdir"])
            if not any((f / spec.path.name).is_file() for f in (folder, folder / spec.project_dir.name)):
                raise pytest.UsageError(
                    f"--tx {raw}: {folder} holds no copy of the project (no {spec.path.name} there "
                    f"or in {spec.project_dir.name}/); copy the project, .capevolve included, and "
                    "point chdir at the copy"
                )
    if gateways and getattr(config.option, "maxworkerrestart", "unset") is None:
        config.option.maxworkerrestart = str(4 * gateways)


def join_option_values(config: pytest.Config) -> None:
    """``--capevolve-run /abs/PROJECT`` → ``--capevolve-run=/abs/PROJECT`` in the arguments
    xdist sends to workers in other folders, which would map a bare path onto an rsync root."""
    args = iter([str(arg) for arg in config.invocation_params.args])
    joined: list[str] = []
    for arg in args:
        takes_value = arg.startswith("--capevolve-") and "=" not in arg and arg not in VALUELESS
        value = next(args, None) if takes_value else None
        joined.append(arg if value is None else f"{arg}={value}")
    config.invocation_params = replace(config.invocation_params, args=tuple(joined))


def worker_target(workerinput: dict[str, Any], target: str) -> str:
    """Where this worker finds the project: the controller's path in the controller's folder,
    else its own folder (or the project's name under it)."""
    if ORIGIN_KEY not in workerinput:
        return target
    origin = json.loads(workerinput[ORIGIN_KEY])
    here = Path.cwd()
    if here.resolve() == Path(origin["cwd"]).resolve():
        return target
    for folder in (here, here / origin["project"]):
        if (folder / origin["spec"]).is_file():
            return str(folder / origin["spec"])
    raise pytest.UsageError(
        f"worker {workerinput.get('workerid', '?')} runs in {here}, which holds no copy of the "
        f"project (no {origin['spec']} there or in {origin['project']}/): point --tx …//chdir= "
        "at a copy of the project, .capevolve included"
    )
