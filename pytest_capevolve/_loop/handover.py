"""Work copies (``runs/<id>/work/<TAG>/``, a copy of the best's snapshot or ``--from``'s; a tag
the run holds anywhere is refused, rollout files are named by tag) and what the proposer gets
there besides its prompt: the handover files, and the parent's failing rollouts the prompt shows.

The handover files (``_project.candidate.HANDOVER``) are never hashed, snapshotted or evaluated;
what they say of the record is drawn again from the log, never copied from a file an optimizer
can rewrite, and no test id is in any of them (:func:`test_id_redactor`). hill-climb removes
them once its optimizer is done (:func:`clear_handover`)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from .._policy import guards
from .._policy.alpha.gate_settings import run_loop_schedule
from .._policy.booking.commit import CommitRefused, render_ledger, render_rejected
from .._policy.booking.journal_entry import JOURNAL
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.candidate import HANDOVER, SEED_TAG, check_tag, handover_ignore
from .._project.microcase_gen import redact
from .._project.spec import Spec, to_stored
from .._store.files import atomic_write_text
from .._store.log.event_kinds import WORK_CREATED
from .._store.rundir import RunDir, jsonl_lines
from .._store.snapshots import writable_copy
from .diagnose import passed
from .handover_docs import AGENT, render_process, render_runmap
from .journal import earlier_rounds, render_journal
from .mechanisms import FILENAME as MECHANISMS
from .mechanisms import entries, render

REDACTED_TEST_ID = "[a test task]"
MIN_ID_LENGTH = 3  # "7" is every seventh line, not a task


class WorkCopy(TypedDict):
    """A work copy just made (``capevolve work new``'s answer)."""

    tag: str
    parent: str
    merged_from: NotRequired[list[str]]
    path: str
    journal: str


def new_work_copy(
    spec: Spec,
    rundir: RunDir,
    tag: str,
    parent: str | None = None,
    *,
    files: dict[str, bytes] | None = None,
    merged_from: list[str] | None = None,
) -> WorkCopy:
    """Create the work copy of ``tag`` from ``parent`` (default: the best), or from ``files``
    (relative path → bytes: a merge of ``merged_from``, :mod:`.merge`)."""
    tag = check_tag(tag)
    guards.refuse_finalized(rundir, guards.Checkpoint.WORK)
    parent = parent or rundir.state.best()
    folder = rundir.work_dir(tag)
    taken = set(rundir.snapshots.known_tags()) | {SEED_TAG} | set(rundir.verdicts.verdicts())
    if tag in taken or folder.exists():
        raise CommitRefused(
            f"tag {tag!r} already exists in run {rundir.run_id}; a tag names one candidate forever "
            "(its rollouts, verdict and decision are filed under it): choose a new tag"
        )
    source = rundir.snapshots.snapshot_dir(parent) if parent != SEED_TAG else spec.capability_path
    if files is not None:
        for relative, data in sorted(files.items()):
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(data)
        folder.mkdir(parents=True, exist_ok=True)
    elif parent != SEED_TAG and not source.is_dir():
        raise CommitRefused(f"parent {parent!r} has no snapshot in run {rundir.run_id} (was it evaluated?)")
    else:
        writable_copy(source, folder, ignore=handover_ignore(source))
    write_handover(spec, rundir, tag, parent, folder, merged_from=merged_from)
    path, journal = str(folder), str(folder / JOURNAL)
    if merged_from:
        rundir.log.append_event(WORK_CREATED, tag=tag, parent=parent, merged_from=list(merged_from))
        return WorkCopy(tag=tag, parent=parent, merged_from=list(merged_from), path=path, journal=journal)
    rundir.log.append_event(WORK_CREATED, tag=tag, parent=parent)
    return WorkCopy(tag=tag, parent=parent, path=path, journal=journal)


def test_id_redactor(rundir: RunDir) -> Callable[[str], str]:
    """Blanks the run's test ids (each as a whole token, in any case) in a text: a refusal or diff may
    name one, and repeating it would confirm which guessed ids are test tasks."""
    splits = rundir.splits() or {}
    ids = sorted(
        {str(t) for t in splits.get("test", []) if len(str(t)) >= MIN_ID_LENGTH}, key=len, reverse=True
    )
    if not ids:
        return lambda text: text
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, ids)) + r")(?!\w)", re.IGNORECASE)
    return lambda text: pattern.sub(REDACTED_TEST_ID, text)


def write_handover(
    spec: Spec,
    rundir: RunDir,
    tag: str,
    parent: str,
    workdir: Path,
    *,
    loop: str = AGENT,
    merged_from: list[str] | None = None,
    prompt: Path | None = None,
) -> None:
    """The handover files in the work copy of ``tag``, each through the test-id redactor."""
    redact = test_id_redactor(rundir)
    rounds = earlier_rounds(rundir, besides=tag)
    root = to_stored(rundir.root, spec.project_dir)
    _fresh(workdir / JOURNAL, redact(render_journal(tag, parent, merged_from, rounds)), mode=None)
    # drawn again from the log, not copied from the run dir's files, which an optimizer can rewrite
    decisions = rundir.decisions()
    ledger = render_ledger(rundir.run_id, decisions) if decisions else "# Ledger\n\nNo decision yet.\n"
    _fresh(workdir / "LEDGER.md", redact(ledger))
    _fresh(workdir / "rejected.jsonl", redact(jsonl_lines(render_rejected(decisions))))
    _fresh(workdir / MECHANISMS, redact(render(rundir.run_id, entries(rundir))))  # from the log
    schedule = run_loop_schedule(rundir)
    _fresh(
        workdir / "PROCESS.md",
        redact(render_process(spec, rundir.run_id, workdir, tag, parent, loop, schedule)),
    )
    where = None if prompt is None else to_stored(prompt, spec.project_dir)
    _fresh(workdir / "RUNMAP.md", redact(render_runmap(rundir.run_id, root, workdir, tag, parent, where)))
    prior = workdir / "prior_iterations"
    if prior.is_symlink() or prior.is_file():  # never written through: it may point anywhere
        prior.unlink()
    elif prior.is_dir():
        shutil.rmtree(prior)
    prior.mkdir(exist_ok=True)  # there even in the first round: the surface is the same every round
    for r in rounds:
        dest = prior / r.tag
        dest.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dest / "diff.patch", redact(r.diff))
        atomic_write_text(dest / "verdict.txt", redact(f"{r.tag}: {r.verdict}\n"))
        atomic_write_text(dest / JOURNAL, redact(r.entries + "\n" if r.entries else ""))
        if (rundir.hill_climb_dir(r.tag) / "outcome.json").is_file():  # a hill-climb round
            outcome = booked_outcome(decisions, r.tag, r.verdict)
            atomic_write_text(
                dest / "outcome.json", redact(json.dumps(outcome, indent=2, ensure_ascii=False))
            )


def booked_outcome(decisions: list[dict[str, Any]], tag: str, verdict: str) -> dict[str, Any]:
    """A hill-climb round's outcome as the log booked it (its standing ``decision`` event), not
    the ``outcome.json`` the run dir holds, which a later optimizer could rewrite."""
    entry = [e for e in decisions if e.get("tag") == tag][-1]
    return {"tag": tag, "verdict": verdict, **{key: entry.get(key) for key in OUTCOME_KEYS}}


OUTCOME_KEYS = "parent gated_against decision basis delta_mean p_value changed_files fixed broke".split()


def _fresh(target: Path, text: str, mode: int | None = 0o444) -> None:
    """``text`` in a new ``target``, read-only by default: a copy of the record, edits change nothing."""
    if target.is_symlink() or target.exists():
        target.unlink()
    target.write_text(text, encoding="utf-8")
    if mode is not None:
        target.chmod(mode)


def clear_handover(workdir: Path) -> None:
    """Remove the handover files from the work copy once the optimizer is done."""
    for name in HANDOVER:
        path = workdir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def failure_examples(
    spec: Spec, rundir: RunDir, parent: str, split: str = "val"
) -> dict[str, dict[str, str]]:
    """Per failing task of ``split``, the first failing rollout of the parent: its feedback (the
    gold answer redacted) and its path; an infra-errored task gets its error instead."""
    try:
        pool = load_tasks(load_adapter(spec.adapter, spec.project_dir), spec.adapter)
    except AdapterError:
        pool = {}
    out: dict[str, dict[str, str]] = {}
    threshold = spec.success_threshold
    # outcomes from the index; feedback read only for the one rollout shown per task
    indexed = sorted(
        rundir.rollouts.indexed_rollouts(split, [parent]),
        key=lambda r: rundir.rollout_path(split, r.task_id, r.tag, r.trial).name,
    )
    for record in indexed:
        if record.task_id in out:
            continue
        path = to_stored(
            rundir.rollout_path(split, record.task_id, record.tag, record.trial), spec.project_dir
        )
        task = pool.get(record.task_id)
        gold = None if task is None else task.target
        if not record.valid:
            out[record.task_id] = {
                "feedback": f"INFRA: {redact(str(record.infra_error), gold)}",
                "rollout": path,
            }
        elif not passed(record, threshold):
            full = rundir.rollouts.read_rollout(split, record.task_id, record.tag, record.trial)
            if full is not None:
                out[record.task_id] = {"feedback": redact(str(full.feedback or ""), gold), "rollout": path}
    return out
