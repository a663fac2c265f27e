"""The tamper guard: a candidate may not change what scores it.

``protected_paths`` are globs relative to a candidate folder (``.gitignore``-like: anchored with
a ``/``, ``**`` across segments, ``dir/`` for all under it). A protected file a candidate
changed, added or removed against the seed, or a symlink leaving the folder, makes it
**indecisive**: never scored, no rollout paid. Controller only, at planning; pure reads."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

from .candidate import CandidateError, compare_digests, file_digests

DEFAULT_WORD = "default"
# the evaluation data: gold and answer files, tasks/ and data/ (also the harness's default)
EVALUATION_DATA = tuple(
    "gold gold.* gold_* gold-* *.gold.* *_gold.* *-gold.* answers* answer_key* answer-key* tasks/** "
    "data/**".split()
)
# What `default` stands for. The adapter's own file name is added from the spec.
DEFAULT_PROTECTED = (
    *EVALUATION_DATA,
    *"tests/** conftest.py".split(),  # the project's own tests
    *"scorer*.py score.py scoring*.py grader*.py reward*.py".split(),  # scorers
    # the run's own configuration, and the microcases that screen candidates
    *"capevolve.yaml splits.json microcases/**".split(),
)
# a glob's wildcards as regular expressions; every other character stands for itself
_WILDCARDS = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
_WILDCARD = re.compile(r"(\*\*/|\*\*|\*|\?)")


def expand(patterns: Iterable[str], adapter_ref: str) -> tuple[str, ...]:
    """The spec's patterns, ``default`` replaced by :data:`DEFAULT_PROTECTED` and the adapter file."""
    out: list[str] = []
    for pattern in patterns:
        if pattern == DEFAULT_WORD:
            adapter_name = Path(adapter_ref.partition(":")[0]).name
            out.extend([*DEFAULT_PROTECTED, adapter_name])
        else:
            out.append(pattern)
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip()
    if pattern.endswith("/"):
        pattern += "**"
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.lstrip("/")
    body = "".join(_WILDCARDS.get(part, re.escape(part)) for part in _WILDCARD.split(pattern))
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + body + r"\Z")


def is_protected(relative: str, patterns: Iterable[str]) -> bool:
    return _any_of(tuple(patterns)).match(relative) is not None


@functools.lru_cache(maxsize=64)
def _any_of(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching what any of ``patterns`` matches (none: nothing): one match per path,
    not one per pattern (a third of the time over a project's files, at each session's start)."""
    return re.compile("|".join(f"(?:{_regex(p).pattern})" for p in patterns) or r"(?!)")


def protected_digests(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """sha256 of every protected file under ``root`` by relative path (refusing outward links)."""
    return file_digests(root, lambda relative: is_protected(relative, patterns))


def tampered(seed_digests: dict[str, str], candidate: Path, patterns: tuple[str, ...]) -> list[str]:
    """Each protected path ``candidate`` changed, added or removed against ``seed_digests``, or
    its symlink that leaves the folder; empty when it may be evaluated."""
    try:
        theirs = protected_digests(candidate, patterns)
    except CandidateError as exc:
        return [f"refused: {exc}"]  # a symlink leaving the folder, a FIFO, a socket, a loop: exc names it
    return compare_digests(theirs, seed_digests)
