"""What a candidate changed, as text: a unified diff of two candidate folders, and its bounded
form for records that must stay small.

For ``capevolve diff``, hill-climb's ``diff.patch``, a booked reject's ``diff`` and the
handover. It reads the files a content hash counts (:func:`.candidate.iter_files`), so the
diff is the change the gate scored."""

from __future__ import annotations

import difflib
from pathlib import Path

from .candidate import iter_files, read_plain

# rejected.jsonl is read whole by the next proposer, and the log keeps every reject's diff:
# a reject carries its change up to this many characters (the head of the diff, then a note)
DIFF_LIMIT = 4000


def unified_diff(old: Path, new: Path, old_label: str, new_label: str) -> str:
    """A unified diff of two candidate folders (handover files and caches left out)."""
    a, b = _texts(old), _texts(new)
    chunks: list[str] = []
    for rel in sorted(set(a) | set(b)):
        left, right = a.get(rel, []), b.get(rel, [])
        if left == right:
            continue
        chunks.extend(
            difflib.unified_diff(
                left,
                right,
                fromfile=f"{old_label}/{rel}" if rel in a else "/dev/null",
                tofile=f"{new_label}/{rel}" if rel in b else "/dev/null",
            )
        )
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
