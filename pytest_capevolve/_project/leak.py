"""The leak guard: an edit encodes a general rule — never a task's id, gold value, or answer.

A candidate whose files (or file names) hold the id or the gold answer of a val or test task is
refused before any rollout (indecisive, unpaid), naming the file and the line. Controller only,
while planning; pure reads. What counts as a match, and what the guard cannot see:
``docs/explanation/what-runs-is-what-is-recorded.md``. A refusal for a gold answer names neither
the task nor the value, so the guard is no oracle for which test task a guessed answer belongs to."""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .candidate import iter_files, tree_digest

DEFAULT_MIN_LENGTH = 4
LABEL_TASKS = 3  # a value that answers this many tasks is a class label, not one task's answer
_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s+")
_MAX_DEPTH = 8
# a closing quote, an optional "+", an opening quote: the seam of adjacent string literals
_LITERAL_SEAM = re.compile(r"""(["'])\s*\+?\s*(["'])""")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{4,}={0,2}")
_DROPPED = ("Cf", "Mn")  # invisible format characters (zero-width, soft hyphen) and combining marks


@dataclass(frozen=True)
class Needle:
    text: str  # normalized: casefolded, whitespace runs as one space
    kind: str  # "id" | "gold"
    task_id: str
    split: str


@dataclass(frozen=True)
class Leak:
    path: str  # relative to the candidate folder
    line: int  # 0: the file's name (its path within the candidate)
    needle: Needle

    def describe(self) -> str:
        where = f"the name of {self.path}" if self.line == 0 else f"{self.path}:{self.line}"
        if self.needle.kind == "id" and self.needle.split == "test":  # named nowhere the optimizer reads
            return f"{where} holds the id of a test task"
        if self.needle.kind == "id":
            return f"{where} holds the id of {self.needle.split} task {self.needle.task_id!r}"
        return f"{where} holds a val or test task's gold answer"


def word_id_note(found: Iterable[Leak]) -> str:
    """What to do when the id found is a plain word ('letter'), which prose uses too: ids that are no
    word are seen only as themselves, so the way on keeps the guard on (a test task's id unnamed)."""
    word = next(
        (f.needle for f in found if f.needle.kind == "id" and not distinctive_id(f.needle.text)), None
    )
    if word is None:
        return ""
    named, example = (
        ("a test task's id", "'w-apple'")
        if word.split == "test"
        else (repr(word.task_id), repr(f"w-{word.task_id}"))
    )
    return (
        f"; {named} is a plain word, seen wherever the word stands: task ids that are no word ({example}, "
        "a prefix and a hyphen) are seen only as themselves, so renaming the tasks in the adapter (a new "
        "run) frees prose that uses the word, with the guard on"
    )


def normalize(text: str) -> str:
    """Needles and lines compared alike: compatibility forms folded (fullwidth, ligatures),
    invisible format characters and combining marks dropped, casefolded, whitespace runs as one
    space (ASCII text is only casefolded: it has none of the others)."""
    if text.isascii():
        return _SPACES.sub(" ", text.casefold()).strip()
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in decomposed if unicodedata.category(c) not in _DROPPED)
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", kept).casefold()).strip()


def distinctive_id(text: str) -> bool:
    """An id that is no common word or number, at any length: it mixes letters and digits,
    or holds punctuation (``n03``, ``a-1``) — never one character."""
    if len(text) < 2:
        return False
    has_letter = any(c.isalpha() for c in text)
    has_digit = any(c.isdigit() for c in text)
    return (has_letter and has_digit) or any(not c.isalnum() and not c.isspace() for c in text)


def views(line: str) -> list[str]:
    """The texts a line is searched as: itself, its adjacent string literals joined, and what
    each base64 run in it decodes to (standard or URL-safe alphabet) when that is text."""
    folded = unicodedata.normalize("NFKC", "".join(c for c in line if unicodedata.category(c) != "Cf"))
    joined = _LITERAL_SEAM.sub("", folded)
    out = [line, joined] if joined != folded else [line]
    decoded = (_decoded(run) for text in {folded, joined} for run in _BASE64.findall(text))
    return out + [text for text in decoded if text]


def _decoded(run: str) -> str | None:
    """A base64 run as text, or None when it is not base64 of (mostly printable) UTF-8."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    padded = body + "=" * (-len(body) % 4)
    for altchars in (None, b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        text = raw.decode("utf-8", errors="ignore")
        if text and sum(c.isprintable() or c.isspace() for c in text) >= 0.9 * len(raw):
            return text
    return None


def gold_values(target: Any, depth: int = 0) -> Iterator[str]:
    """The strings a target holds: itself, a number's decimal text, the leaves of lists,
    tuples and dict values; a multi-line string by its longest line."""
    if depth > _MAX_DEPTH or target is None or isinstance(target, bool):
        return
    if isinstance(target, str):
        lines = [line for line in target.splitlines() if line.strip()]
        if lines:
            yield max(lines, key=len)
    elif isinstance(target, int | float):
        yield str(target)
    elif isinstance(target, list | tuple | set | frozenset | dict):
        for item in target.values() if isinstance(target, dict) else target:
            yield from gold_values(item, depth + 1)


def screen_key(
    candidate_hash: str, parent_hash: str, tasks_digest: str, guarded: Mapping[str, str], min_length: int
) -> str:
    """What a screen's finding rests on, as one digest: the candidate's bytes and its parent's (the
    lines it inherits), the task pool (:func:`.harness.tasks_digest`: ids and gold answers), the guarded
    ids with their splits, the minimum length, and this module's own bytes (how a match is found)."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    facts = [candidate_hash, parent_hash, tasks_digest, sorted(guarded.items()), min_length]
    digest.update(json.dumps(facts, separators=(",", ":")).encode("utf-8"))
    return digest.hexdigest()


def needles(tasks: Iterable[Any], guarded: Mapping[str, str], min_length: int) -> list[Needle]:
    """The needles of the ``guarded`` tasks (task id → its split: val or test) in ``tasks``
    (the whole pool, which decides what is a label)."""
    pool = list(tasks)
    golds = [[normalize(v) for v in gold_values(task.target)] for task in pool]  # each once
    shared = Counter(value for values in golds for value in set(values))
    found: dict[tuple[str, str], Needle] = {}
    for task, values in zip(pool, golds, strict=True):
        split = guarded.get(str(task.id))
        if split is None:
            continue
        task_id = str(task.id)
        for text, kind in [(normalize(task_id), "id"), *((value, "gold") for value in values)]:
            long_enough = len(text) >= min_length or (kind == "id" and distinctive_id(text))
            if not text or not long_enough or (kind == "gold" and shared[text] >= LABEL_TASKS):
                continue
            found.setdefault((text, kind), Needle(text, kind, task_id, split))
    return sorted(found.values(), key=lambda n: (n.kind, n.text))


class Matcher:
    """Needles indexed for a scan: one-word needles by a set look-up of each line's words, the
    others by a search bounded by non-word characters."""

    def __init__(self, found: Iterable[Needle]) -> None:
        self.words: dict[str, Needle] = {}
        self.phrases: list[tuple[re.Pattern[str], Needle]] = []
        for needle in found:
            if _WORD.fullmatch(needle.text):
                self.words.setdefault(needle.text, needle)
            else:
                pattern = re.compile(r"(?<!\w)" + re.escape(needle.text) + r"(?!\w)")
                self.phrases.append((pattern, needle))

    def __bool__(self) -> bool:
        return bool(self.words or self.phrases)

    def in_line(self, line: str) -> Needle | None:
        for view in views(line):
            found = self._in_text(normalize(view))
            if found is not None:
                return found
        return None

    def _in_text(self, text: str) -> Needle | None:
        for word in _WORD.findall(text):
            if word in self.words:
                return self.words[word]
        for pattern, needle in self.phrases:
            if pattern.search(text):
                return needle
        return None


def read_candidate(root: Path) -> tuple[str, dict[str, bytes]]:
    """The candidate's files read once: their content hash (:func:`.candidate.content_hash`'s) and the
    bytes it hashed, by relative path, which the screen then reads. The bytes screened are the bytes
    hashed, and registering under that hash (``expected``) refuses any others: a writer racing the
    screen cannot have one version screened and another run."""
    files: dict[str, bytes] = {}
    resolved = root.resolve()

    def read(path: Path) -> bytes:
        data = path.read_bytes()
        files[path.relative_to(resolved).as_posix()] = data
        return data

    return "sha256:" + tree_digest(root, read), files


def _text_lines(data: bytes) -> list[str]:
    """The lines a reader of ``data`` could take for text; a file holding NULs is searched with
    each NUL as a line break, and again with the NULs dropped (UTF-16, NUL-spelt values)."""
    if b"\0" not in data:
        return data.decode("utf-8", errors="replace").splitlines()
    split = data.replace(b"\0", b"\n").decode("utf-8", errors="replace").splitlines()
    return split + data.replace(b"\0", b"").decode("utf-8", errors="replace").splitlines()


def _name_line(relative: str) -> str:
    """A file's path as the guard reads it: its names are words an agent reads too."""
    return relative.replace("/", " ")


def parent_lines(parent: Path) -> set[str]:
    """Every line (trimmed) of every file of the parent: what a candidate inherits."""
    lines: set[str] = set()
    root = parent.resolve()
    for path in iter_files(parent):
        lines.update(line.strip() for line in _text_lines(path.read_bytes()))
        lines.add(_name_line(path.relative_to(root).as_posix()))
    return lines


def find_leaks(
    candidate: Mapping[str, bytes], inherited: set[str], matcher: Matcher, limit: int = 20
) -> list[Leak]:
    """The lines ``candidate`` (its files' bytes by relative path, :func:`read_candidate`'s) adds (not in
    ``inherited``) that hold a needle, at most ``limit``."""
    return list(itertools.islice(_leaks(candidate, inherited, matcher), limit)) if matcher else []


def _leaks(candidate: Mapping[str, bytes], inherited: set[str], matcher: Matcher) -> Iterator[Leak]:
    for relative, data in candidate.items():  # in the order they were read (iter_files')
        named = _name_line(relative)
        if named not in inherited and (needle := matcher.in_line(named)) is not None:
            yield Leak(relative, 0, needle)  # line 0: the file's name
        for number, line in enumerate(_text_lines(data), start=1):
            if line.strip() and line.strip() not in inherited and (needle := matcher.in_line(line)):
                yield Leak(relative, number, needle)
