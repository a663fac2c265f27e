"""What the optimizer gets besides its prompt: the handover files in the work copy, and the
parent's failing rollouts the prompt shows.

Used by :mod:`.hill_climb` once per iteration, before the optimizer runs (:func:`write_handover`,
:func:`failure_examples`) and after it (:func:`clear_handover`: handover files are never part of
a snapshot, so the candidate the gate scores is only what the optimizer edited).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.candidate import HANDOVER
from .._project.microcase_gen import redact
from .._project.paths import to_stored
from .._project.spec import Spec
from .._store.files import atomic_write_text
from .._store.rundir import RunDir


def write_handover(rundir: RunDir, cid: str, workdir: Path, earlier: list[str], project_dir: Path) -> None:
    """The optimizer's context in the work copy: the ledger (read-only), the rejected
    memory, a map of the run, and each earlier iteration's diff and outcome."""
    for name in ("LEDGER.md", "rejected.jsonl"):
        source = rundir.root / name
        target = workdir / name
        if source.is_file():
            shutil.copyfile(source, target)
        else:
            target.write_text("" if name.endswith(".jsonl") else "# Ledger\n\nNo decision yet.\n")
        target.chmod(0o444)
    prior = workdir / "prior_iterations"
    for other in earlier:
        if other == cid:
            continue
        src = rundir.hill_climb_dir(other)
        dest = prior / other
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("diff.patch", "outcome.json"):
            if (src / name).is_file():
                shutil.copyfile(src / name, dest / name)
    root = to_stored(rundir.root, project_dir)
    atomic_write_text(
        workdir / "RUNMAP.md",
        f"# Where things are (run {rundir.run_id})\n\n"
        f"- this work copy (edit it): `{workdir}` — a copy of the best, `{rundir.state.best()}`\n"
        f"- the prompt of this iteration: `{root}/hill_climb/{cid}/prompt.md`\n"
        f"- rollouts (input, output, feedback): `{root}/rollouts/val/<task>__<tag>__t<k>.json`\n"
        f"- verdicts (every number a decision rests on): `{root}/verdicts/<tag>.json`\n"
        f"- snapshots of every evaluated candidate: `{root}/candidates/<tag>/files/`\n"
        "- `LEDGER.md`: one row per decision (read-only copy)\n"
        "- `rejected.jsonl`: what was refuted, against which parent, which files, which tasks\n"
        "- `prior_iterations/<cid>/`: each earlier iteration's diff.patch and outcome.json\n"
        "- `JOURNAL.md`: your notes; kept with the iteration, never part of the candidate\n",
    )


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
    # the parent's outcomes from the index, in the rollout files' order; a failing rollout's
    # feedback from its file, read only for the one shown per task
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
        elif not (record.passed if record.passed is not None else (record.reward or 0.0) >= threshold):
            full = rundir.rollouts.read_rollout(split, record.task_id, record.tag, record.trial)
            if full is not None:
                out[record.task_id] = {
                    "feedback": redact(str(full.feedback or ""), gold),
                    "rollout": path,
                }
    return out
