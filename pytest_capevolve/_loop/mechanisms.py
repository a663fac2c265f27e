"""The shared mechanisms ledger: what the fanned-out sub-agents found, one deduplicated list.

K sub-agents on K failing tasks keep rediscovering one cause, so each lists the ledger before it
diagnoses and adds the general mechanism it found (``capevolve mechanism add``); the next
proposer reads ``MECHANISMS.md``. The record is the log: an add is a ``mechanism`` event and the
file is rendered from them, so editing it changes nothing. A repeat (casefolded, whitespace and
end punctuation folded) joins the first entry; nothing is rewritten. The leak guard
(:mod:`.._project.leak`) refuses a test task or a gold answer. Findings, not evidence: ``--by`` is
who *says* it; no decision reads the ledger."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .._project import leak
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.candidate import SEED_TAG, CandidateError, check_tag
from .._project.spec import Spec
from .._project.splits import TEST_SPLIT
from .._store.files import atomic_write_text
from .._store.log.event_kinds import MECHANISM
from .._store.rundir import RunDir
from ..exitcodes import Refusal
from .task_eval import split_of

FILENAME = "MECHANISMS.md"
MAX_LENGTH = 600  # one cause in a sentence or two, not a report
_TRAILING = re.compile(r"[\s.;:!,]+$")


def same_key(text: str) -> str:
    """What two mechanisms are compared by: casefolded, whitespace folded, no end punctuation."""
    return _TRAILING.sub("", leak.normalize(text))


def entries(rundir: RunDir) -> list[dict[str, Any]]:
    """The ledger from the log: one entry per mechanism in the order first found, repeats joined."""
    found: dict[str, dict[str, Any]] = {}
    for event in rundir.log.of_kinds(MECHANISM):
        ident = str(event.get("id"))
        entry = found.setdefault(
            ident, {"id": ident, "text": str(event.get("text", "")), "tasks": [], "by": []}
        )
        for task_id in event.get("tasks") or []:
            if task_id not in entry["tasks"]:
                entry["tasks"].append(str(task_id))
        by = event.get("by")
        if by and by not in entry["by"]:
            entry["by"].append(str(by))
    return list(found.values())


def _check_text(spec: Spec, rundir: RunDir, text: str) -> str:
    """The text as held (one line), refused when it is empty, long, or holds a guarded needle."""
    line = " ".join(text.split())
    if not line:
        raise Refusal("a mechanism is one sentence naming a cause; got nothing")
    if len(line) > MAX_LENGTH:
        raise Refusal(
            f"a mechanism is one sentence or two (at most {MAX_LENGTH} characters), got {len(line)}"
        )
    splits = rundir.splits() or {}
    guarded = {
        **dict.fromkeys(splits.get("val", []), "val"),
        **dict.fromkeys(splits.get(TEST_SPLIT, []), "test"),
    }
    try:
        pool = load_tasks(load_adapter(spec.adapter, spec.project_dir), spec.adapter)
    except AdapterError as exc:
        raise Refusal(str(exc)) from None
    # always on for the ledger (every proposer reads it): the spec's length, else the default
    min_length = spec.leak_guard_min_length or leak.DEFAULT_MIN_LENGTH
    # a val task's id may be named (diagnose shows them); its gold, and anything of test, not
    found = [
        n
        for n in leak.needles(pool.values(), guarded, min_length)
        if not (n.kind == "id" and n.split == "val")
    ]
    needle = leak.Matcher(found).in_line(line)
    if needle is not None:
        what = "the id of a test task" if needle.kind == "id" else "a val or test task's gold answer"
        raise Refusal(f"the mechanism holds {what}; a mechanism is a general cause, never a task's answer")
    return line


def _check_by(rundir: RunDir, by: str | None) -> str | None:
    if by is None:
        return None
    try:
        tag = check_tag(by)
    except CandidateError as exc:
        raise Refusal(f"--by: {exc}") from None
    known = tag == SEED_TAG or rundir.work_dir(tag).is_dir() or tag in rundir.snapshots.known_tags()
    if not known:
        raise Refusal(f"--by {tag!r}: no work copy or candidate of that tag in run {rundir.run_id}")
    return tag


def add(
    spec: Spec, rundir: RunDir, text: str, tasks: Sequence[str] = (), by: str | None = None
) -> dict[str, Any]:
    """Add a mechanism, or join a repeat to the entry it repeats; the answer says which."""
    line = _check_text(spec, rundir, text)
    ids = list(split_of(rundir, tasks))  # train or val ids, each once; test refused unnamed
    author = _check_by(rundir, by)
    with rundir.lock():  # two sub-agents adding at once get two ids, or one entry
        listed = entries(rundir)
        same = next((e for e in listed if same_key(e["text"]) == same_key(line)), None)
        if same is None:
            ident = f"M{len(listed) + 1}"
            rundir.log.append_event(MECHANISM, id=ident, text=line, tasks=ids, by=author)
            status = "added"
        else:
            ident = same["id"]
            new_tasks = [i for i in ids if i not in same["tasks"]]
            if new_tasks or (author and author not in same["by"]):
                rundir.log.append_event(
                    MECHANISM, id=ident, text=same["text"], tasks=new_tasks, by=author, repeat=True
                )
                status = "joined"
            else:
                status = "already listed"
        listed = entries(rundir)
        atomic_write_text(rundir.root / FILENAME, render(rundir.run_id, listed))
    entry = next(e for e in listed if e["id"] == ident)
    return {"status": status, "entry": entry, "mechanisms": len(listed), "file": FILENAME}


def listing(rundir: RunDir, task: str | None = None) -> dict[str, Any]:
    """The ledger, or the entries about ``task`` plus every entry about no task (those apply to
    everyone, and a filtered view must not hide them)."""
    listed = entries(rundir)
    if task is not None:
        listed = [e for e in listed if task in e["tasks"] or not e["tasks"]]
    return {"run_id": rundir.run_id, "mechanisms": listed}


def render(run_id: str, listed: list[dict[str, Any]]) -> str:
    """``MECHANISMS.md``: one line per mechanism, with the tasks it was seen on and who found it."""
    lines = [
        f"# Mechanisms found (run {run_id})",
        "",
        "Written by `capevolve mechanism add` (the per-task sub-agents of a fan-out), from the run's",
        "log; read by the proposer. One line per general cause, deduplicated. Findings, not",
        "evidence: only a gate decides. Before diagnosing a task, look here: if its cause is listed,",
        "build on it instead of finding it again.",
        "",
    ]
    if not listed:
        lines.append("No mechanism recorded yet.")
    for entry in listed:
        tasks = ", ".join(entry["tasks"]) or "—"
        by = ", ".join(entry["by"]) or "—"
        lines.append(f"- **{entry['id']}** {entry['text']} (tasks: {tasks}; found by: {by})")
    return "\n".join(lines) + "\n"
