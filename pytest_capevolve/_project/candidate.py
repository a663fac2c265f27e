"""Candidates: tags, content hashes, the names built from ids, and what a candidate changed.

A candidate's identity is the hash of its bytes, so "the same tag" never means two
capabilities; its text hash (:func:`text_hash`) is blind to line endings, trailing
whitespace and zero-width characters, so refuted bytes re-proposed with a trailing space are no
new candidate. Its change as text (:func:`unified_diff`) reads the files the content hash counts,
so the diff is the change the gate scored. Pure filesystem reads."""

from __future__ import annotations

import difflib
import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from ..exitcodes import REFUSED, CapevolveError

SEED_TAG = "seed"
# A tag never contains "__" and starts with a letter or digit: every tag a plain folder name
# (`candidates/<tag>`, `work/<tag>`), and `screens/<tag>__tier<N>.json` unambiguous.
TAG_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.\-]|_(?!_))*$")
_SAFE_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_NAME = 120
_IGNORED = frozenset({"__pycache__", ".pytest_cache", ".capevolve", ".git"})
# rejected.jsonl is read whole by the next proposer, and the log keeps every reject's diff:
# a reject carries its change up to this many characters (the head of the diff, then a note)
DIFF_LIMIT = 4000
# The optimizer's handover files at a candidate's top level: never hashed, snapshotted or evaluated.
HANDOVER = frozenset(
    "JOURNAL.md LEDGER.md MECHANISMS.md PROCESS.md RUNMAP.md rejected.jsonl prior_iterations".split()
)


def handover_ignore(root: Path) -> Callable[[str, list[str]], set[str]]:
    """A ``shutil.copytree`` ignore for candidate ``root``: caches anywhere, handover files at
    its top level only, as :func:`iter_files` counts them."""
    top = os.path.realpath(root)

    def ignore(folder: str, names: list[str]) -> set[str]:
        dropped = {n for n in names if n == "__pycache__"}
        if os.path.realpath(folder) == top:
            dropped |= {n for n in names if n in HANDOVER}
        return dropped

    return ignore


class CandidateError(CapevolveError):
    """A candidate folder or tag cannot be used; the message says why."""

    exit_code = REFUSED


def check_tag(tag: str) -> str:
    if not TAG_RE.match(tag) or len(tag) > 64:
        raise CandidateError(
            f"tag {tag!r} is not usable: a tag is 1-64 letters, digits, '.', '-' or single '_', "
            "starting with a letter or digit (rename the folder or pass --capevolve-tag)"
        )
    return tag


_NULL_CONTROL_TAG = re.compile(r"^(?P<best>.+)-null(?P<n>[0-9]+)$", re.IGNORECASE)  # SEED-NULL1 too


def null_control_of(tag: str) -> str | None:
    """The tag whose null control ``tag`` is named as (``seed-null1`` → ``seed``), else None:
    reserved names, or a real candidate would block every later gate."""
    found = _NULL_CONTROL_TAG.match(tag)
    return None if found is None else found.group("best")


def escape_id(task_id: str) -> str:
    """A task id as a safe, injective file-name part, even on a case-insensitive file system:
    characters outside ``[A-Za-z0-9_.-]`` and a leading dot become ``%XX`` per UTF-8 byte, an
    upper-case letter ``^`` and its lower case (``Q1`` → ``^q1``), and a name too long is cut and
    suffixed with a hash of the full id."""
    if _PLAIN_ID.fullmatch(task_id) and "__" not in task_id:
        return task_id
    out = []
    for i, ch in enumerate(task_id):
        if "A" <= ch <= "Z":
            out.append("^" + ch.lower())
        elif ch in _SAFE_ID_CHARS and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    name = "".join(out)
    # "__" separates the parts of a rollout file name; escape the second "_" of any run.
    name = name.replace("__", "_%5F")
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:16]
        name = f"{name[: _MAX_NAME - 18]}~{digest}"
    return name


# An id that escaping leaves as it is (lower case, safe characters, no leading dot, no "__",
# short): most ids, and a rollout's file name is built for every rollout persisted.
_PLAIN_ID = re.compile(r"[a-z0-9_\-][a-z0-9_.\-]{0,119}")


def iter_files(root: Path) -> list[Path]:
    """Every regular file under ``root`` (sorted, caches skipped). Symlinks are refused when
    they point outside ``root``: a candidate must not smuggle in bytes it does not contain."""
    root = root.resolve()
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        top = dirpath == str(root)
        dirnames[:] = sorted(d for d in dirnames if d not in _IGNORED and not (top and d in HANDOVER))
        base = Path(dirpath)
        if top:
            filenames = [f for f in filenames if f not in HANDOVER]
        for name in list(dirnames) + sorted(filenames):
            _check_entry(base / name, root)
        files.extend(base / name for name in sorted(filenames) if not name.endswith(".pyc"))
    return sorted(files)


_NOT_FILES = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _check_entry(path: Path, root: Path) -> None:
    """Refuse, without opening it, a symlink leaving ``root``, looping or dangling, and anything
    but a regular file or a folder (a FIFO would block the hash's read forever)."""
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            target = path.resolve(strict=True)
            if not target.is_relative_to(root):
                raise CandidateError(f"{path} is a symlink to {target}, outside the candidate folder {root}")
            mode = target.stat().st_mode
    except (RuntimeError, OSError) as exc:  # RuntimeError: pathlib's "Symlink loop" (3.11, 3.12)
        looped = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
        problem = "a symlink loop" if looped else f"unreadable ({getattr(exc, 'strerror', None) or exc})"
        raise CandidateError(
            f"{path} is {problem}; a candidate holds regular files and folders only: remove it"
        ) from None
    kind = _NOT_FILES.get(stat.S_IFMT(mode))
    if kind is not None:
        raise CandidateError(
            f"{path} is {kind}, not a capability file; a candidate holds regular files and "
            "folders only: remove it"
        )


def content_hash(root: Path) -> str:
    """sha256 over (relative path, bytes) of every file: equal iff the trees are byte-equal."""
    return "sha256:" + tree_digest(root, Path.read_bytes)


def tree_digest(root: Path, read: Callable[[Path], bytes]) -> str:
    """sha256 over (relative path, ``read(file)``) of every file, each length-prefixed."""
    root = root.resolve()
    digest = hashlib.sha256()
    for path in iter_files(root):
        rel = path.relative_to(root).as_posix().encode("utf-8")
        data = read(path)
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def normalized_text(data: bytes) -> bytes:
    """``data`` as the text hash reads it (unchanged when it is not UTF-8 text: a file that is
    not text counts by its bytes)."""
    if b"\0" in data:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    lines = text.translate(_ZERO_WIDTH).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n").encode("utf-8")


# characters no reader of a text sees (zero-width space, non-joiner, joiner, word joiner, BOM)
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


def text_hash(root: Path) -> str:
    """sha256 over (relative path, normalized text) of every file: equal when two trees differ
    in line endings, trailing whitespace, blank lines at either end and zero-width characters at
    most (paths count as they are: an added empty file is a real change). An exact repeat is
    refused (:mod:`.._policy.repeats.identity`)."""
    return "text-sha256:" + tree_digest(root, lambda path: normalized_text(path.read_bytes()))


def text_hash_of(files: Mapping[str, bytes]) -> str:
    """:func:`text_hash` of files already read (relative posix path → bytes, in the walk's order, as
    :func:`.leak.read_candidate` holds them): the text of the bytes a check judged, not of a later read."""
    digest = hashlib.sha256()
    for relative, data in files.items():
        rel, text = relative.encode("utf-8"), normalized_text(data)
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(len(text).to_bytes(8, "big") + text)
    return "text-sha256:" + digest.hexdigest()


def file_digests(root: Path, keep: Callable[[str], bool] = lambda relative: True) -> dict[str, str]:
    """sha256 of every file under ``root`` (as :func:`iter_files` walks it) whose relative posix
    path ``keep`` accepts. Raises CandidateError for a symlink that leaves ``root``."""
    root = root.resolve()
    relatives = (path.relative_to(root).as_posix() for path in iter_files(root))
    return {rel: hashlib.sha256((root / rel).read_bytes()).hexdigest() for rel in relatives if keep(rel)}


def compare_digests(mine: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """Each path ``mine`` added, removed or changed against ``theirs``, as ``path (added)`` …"""
    out = []
    for path in sorted(set(mine) | set(theirs)):
        if path not in theirs:
            out.append(f"{path} (added)")
        elif path not in mine:
            out.append(f"{path} (removed)")
        elif mine[path] != theirs[path]:
            out.append(f"{path} (changed)")
    return out


def changed_files(candidate: Path, parent: Path) -> list[str]:
    return compare_digests(file_digests(candidate), file_digests(parent))


def read_plain(path: Path) -> bytes | None:
    """The bytes of the regular file ``path``, opened without following a link (None when it
    is a link, gone, or not a regular file): a file listed as plain may be made a link to a
    gold file before it is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read() if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else None


def unified_diff(old: Path, new: Path, old_label: str, new_label: str) -> str:
    """A unified diff of two candidate folders (handover files and caches left out), for
    ``capevolve diff``, hill-climb's ``diff.patch``, a booked reject's ``diff`` and the handover."""
    a, b = _texts(old), _texts(new)
    chunks: list[str] = []
    for rel in sorted(set(a) | set(b)):
        left, right = a.get(rel, []), b.get(rel, [])
        if left == right:
            continue
        old_name = f"{old_label}/{rel}" if rel in a else "/dev/null"
        new_name = f"{new_label}/{rel}" if rel in b else "/dev/null"
        chunks.extend(difflib.unified_diff(left, right, fromfile=old_name, tofile=new_name))
    text = "".join(chunks)
    return text if not text or text.endswith("\n") else text + "\n"


def bounded(diff: str, limit: int = DIFF_LIMIT) -> str:
    """``diff`` when it has at most ``limit`` characters; else its first lines that fit and one
    line saying how much was left out (a cut diff says so: never a silently partial change)."""
    if len(diff) <= limit:
        return diff
    kept = diff[:limit]
    kept = kept[: kept.rfind("\n") + 1] if "\n" in kept else kept
    return kept + f"... (diff cut: {len(diff) - len(kept)} of {len(diff)} characters left out)\n"


def _texts(root: Path) -> dict[str, list[str]]:
    out = {}
    base = root.resolve()
    for path in iter_files(base):
        rel = path.relative_to(base).as_posix()
        data = read_plain(path)
        if data is None:  # listed as a file, a link or gone by the time it is read
            out[rel] = ["(not read: no longer a plain file)\n"]
            continue
        try:
            out[rel] = data.decode("utf-8").splitlines(keepends=True)
        except UnicodeDecodeError:
            out[rel] = [f"(binary file, {len(data)} bytes)\n"]
    return out
