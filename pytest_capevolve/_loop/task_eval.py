"""``capevolve eval-task TAG IDS``: one candidate on a few named train or val tasks, for diagnosis.

A per-task sub-agent (cap-evolve's ``taskeval.py``) tunes on what this returns, so it is a
training number, kept apart from everything a decision reads: its rollouts go to
``task_evals/<tag>/<n>.json`` and a ``task_eval`` event, never to ``rollouts/`` (no gate
evidence, no first logged outcome); at seeds of their own (``base_seed + DIAGNOSIS_SEED_BASE +
k``), so a candidate tuned until these pass has not been tuned on its gate's draws; nothing is
booked, and they are never reused as a gate's (each call is a look no α accounts for). A test task
is refused without saying which. The candidate runs in a sandbox child from a copy without the
handover files, under a claim on the run, within ``max_metric_calls`` and ``max_usd``."""

from __future__ import annotations

import contextlib
import shlex
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._engine.runner import run_and_score
from .._engine.sandbox import isolated
from .._policy.stop.afford import Ceilings, afford
from .._project import harness
from .._project.adapter import AdapterError, check_cost, load_adapter, load_tasks
from .._project.candidate import SEED_TAG, content_hash, escape_id, handover_ignore, iter_files
from .._project.microcase_gen import redact
from .._project.spec import Spec, to_stored
from .._project.splits import TEST_SPLIT
from .._project.way_on import candidate_folder as named_folder
from .._project.way_on import pasteable
from .._store.files import atomic_write_json
from .._store.log.event_kinds import TASK_EVAL
from .._store.readers.harness_lock import locked_harness
from .._store.rundir import RunDir
from .._store.sessions.claims import Claims
from .._store.snapshots import writable_copy
from ..exitcodes import Refusal

FOLDER = "task_evals"
DIAGNOSIS_SEED_BASE = 2_000_000_000  # above every replicate block's seeds (≤ 1e9 + trials), below 2**32
MAX_TRIALS = 100
MAX_FEEDBACK = 4  # distinct failure feedback lines shown per task


def parse_ids(text: str) -> list[str]:
    """``a,b,c`` as ids, each once, in the order given."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise Refusal("name at least one task id (a,b,c)")
    return list(dict.fromkeys(ids))


def split_of(rundir: RunDir, ids: Sequence[str]) -> dict[str, str]:
    """Each id's split, train or val; a test id is refused without naming it, an unknown one by name."""
    splits = rundir.splits() or {}
    test = set(splits.get(TEST_SPLIT, []))
    sealed = [i for i in ids if i in test]
    if sealed:
        raise Refusal(
            f"{len(sealed)} of the named tasks are in the sealed test split; the test split is scored "
            "once, by finalize, never for diagnosis — name train or val tasks"
        )
    where = {i: s for s in ("train", "val") for i in splits.get(s, [])}
    unknown = [i for i in ids if i not in where]
    if unknown:
        raise Refusal(
            f"no train or val task {', '.join(map(repr, unknown))} in run {rundir.run_id} (see "
            "capevolve diagnose for the ids)"
        )
    return {i: where[i] for i in ids}


def candidate_folder(spec: Spec, rundir: RunDir, tag: str, *, work_first: bool = False) -> Path:
    """Where ``tag``'s files are (``capevolve diff``'s, ``merge``'s and ``eval-task``'s): its
    snapshot, else (the seed) the capability folder, else the folder its verdict was gated from,
    else its work copy; ``work_first``: the work copy, which an optimizer may still be editing."""
    source = ((rundir.verdicts.verdict(tag) or {}).get("details") or {}).get("source")
    seed = spec.capability_path if tag == SEED_TAG else None
    work = rundir.work_dir(tag)
    folders = (rundir.snapshots.snapshot_dir(tag), seed, Path(source) if source else None, work)
    for folder in (work, *folders) if work_first else folders:
        if folder is not None and folder.is_dir():
            return folder
    known = ", ".join(sorted(set(rundir.snapshots.known_tags()))) or "none"
    raise Refusal(
        f"{tag!r} has neither a snapshot nor a work copy in run {rundir.run_id} (known: {known}); "
        + _made_known(spec, tag)
    )


def _made_known(spec: Spec, tag: str) -> str:
    """The ways a tag the run does not know gets its files: its folder evaluated (a folder's name is
    its tag), or a work copy of the best made under that name, to edit."""
    work_new = pasteable(f"`capevolve work new {shlex.quote(tag)} PROJECT`", spec.project_dir)
    folder = named_folder(tag, spec.project_dir, "")
    if not folder:
        return f"make it a work copy of the best, to edit: {work_new}"
    evaluate = pasteable(f"`pytest --capevolve-run PROJECT --capevolve-candidate {folder}`", spec.project_dir)
    return f"evaluate its folder first ({evaluate}), or make it a work copy of the best, to edit: {work_new}"


def _check_affordable(spec: Spec, rundir: RunDir, planned: int) -> None:
    spent = rundir.state.read_state().get("spent", {})
    earlier = rundir.log.of_kinds(TASK_EVAL)  # what every earlier task eval of the run paid
    can = afford(
        planned,
        rollouts_spent=int(spent.get("metric_calls", 0)) + sum(int(e.get("rollouts") or 0) for e in earlier),
        runner_usd_spent=float(spent.get("usd", 0.0)) + sum(float(e.get("cost_usd") or 0.0) for e in earlier),
        ceilings=Ceilings.from_spec(spec),
        optimizer_usd_spent=float(spent.get("optimizer_usd", 0.0)),
    )
    crossed = [b["message"] for b in can.blockers if b["ceiling"] in ("max_metric_calls", "max_usd")]
    if crossed:
        raise Refusal(
            f"{planned} rollouts would cross a ceiling: {'; '.join(crossed)} (counting the run's "
            "rollouts and every earlier task eval; see capevolve spend)"
        )


def harness_moved(spec: Spec, rundir: RunDir, pool: dict[str, Any]) -> str | None:
    """Why the run's next session would refuse the project's harness (moved since the run locked it)."""
    locked = locked_harness(rundir)
    changed = harness.changes(locked, harness.of_project(spec, pool.values())) if locked is not None else []
    return harness.refusal(rundir.run_id, changed) if changed else None


def task_eval(
    spec: Spec, rundir: RunDir, tag: str, ids: Sequence[str], *, trials: int | None = None
) -> dict[str, Any]:
    """Run ``tag`` on ``ids``, ``trials`` each; the per-task answer (gold redacted) is also
    written to ``task_evals/<tag>/<n>.json`` and logged as a ``task_eval``."""
    trials = spec.num_trials if trials is None else trials
    if not 1 <= trials <= MAX_TRIALS:
        raise Refusal(f"--trials {trials}: give a whole number from 1 to {MAX_TRIALS}")
    splits = split_of(rundir, ids)
    source = candidate_folder(spec, rundir, tag, work_first=True)
    _check_affordable(spec, rundir, len(ids) * trials)
    try:
        adapter = load_adapter(spec.adapter, spec.project_dir)
        pool = load_tasks(adapter, spec.adapter)
    except AdapterError as exc:
        raise Refusal(str(exc)) from None
    if (moved := harness_moved(spec, rundir, pool)) is not None:
        raise Refusal(moved)
    seeds = [spec.base_seed + DIAGNOSIS_SEED_BASE + k for k in range(trials)]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="capevolve-task-eval-") as scratch:
        folder = Path(scratch) / "candidate"
        iter_files(source)  # what a snapshot refuses (a symlink out of the folder, a FIFO): refused
        writable_copy(source, folder, ignore=handover_ignore(source))  # its bytes, no handover
        content = content_hash(folder)
        claims = Claims(rundir.root)  # a claim of its own: a gate meanwhile is not alone
        claims.take([("task_eval", task_id, tag, k) for task_id in ids for k in range(trials)])
        runner = isolated(adapter, spec.adapter, spec.project_dir, spec.judge_rescores, spec=spec)
        try:
            tasks, cost = _run(spec, runner, pool, folder, splits, seeds)
        finally:
            runner.close()
            claims.release()
    answer: dict[str, Any] = {
        "tag": tag,
        "content": content,
        "source": to_stored(source, spec.project_dir),
        "tasks": tasks,
        "trials": trials,
        "seeds": f"base_seed + {DIAGNOSIS_SEED_BASE} + k (k = 0..{trials - 1}); the gate's are base_seed + k",
        "rollouts": len(ids) * trials,
        "cost_usd": round(cost, 6),
        "seconds": round(time.time() - started, 3),
        "evidence": "none: a training number for diagnosis — never read by a gate, nothing booked; "
        "the gate pays its own rollouts",
    }
    return _record(spec, rundir, answer)


def _run(
    spec: Spec, runner: Any, pool: dict[str, Any], folder: Path, splits: dict[str, str], seeds: list[int]
) -> tuple[list[dict[str, Any]], float]:
    threshold, cost = spec.success_threshold, 0.0
    rows = []
    for task_id, split in splits.items():
        task = pool[task_id]
        rewards: list[float] = []
        feedback: list[str] = []
        infra: list[str] = []
        outcomes = []
        for k, seed in enumerate(seeds):
            scored = run_and_score(
                runner, task, folder, seed=seed, split=split, timeout_s=spec.rollout_timeout_s
            )
            if scored.rollout is not None:
                # a rollout that reports no cost the session would take: not a spend
                with contextlib.suppress(AdapterError):
                    cost += check_cost(scored.rollout.cost_usd, f"task {task_id!r}")
            if scored.infra_error is not None or scored.reward is None:
                infra.append(redact(str(scored.infra_error), task.target))
                outcomes.append({"trial": k, "seed": seed, "infra_error": infra[-1]})
                continue
            rewards.append(float(scored.reward))
            text = redact(str(scored.feedback or ""), task.target)
            if scored.reward < threshold and text and text not in feedback:
                feedback.append(text)
            outcomes.append({"trial": k, "seed": seed, "reward": float(scored.reward), "feedback": text})
        passes = sum(r >= threshold for r in rewards)
        rows.append(
            {
                "task_id": task_id,
                "split": split,
                "passes": passes,
                "trials": len(rewards),
                "mean_reward": round(sum(rewards) / len(rewards), 6) if rewards else None,
                "infra_errors": len(infra),
                "failure_feedback": feedback[:MAX_FEEDBACK],
                "outcomes": outcomes,
            }
        )
    return rows, cost


def _record(spec: Spec, rundir: RunDir, answer: dict[str, Any]) -> dict[str, Any]:
    """Write the answer apart from the gate's evidence and log its spend (under the run's lock,
    so two sub-agents' files never share a number)."""
    tag = str(answer["tag"])
    folder = rundir.root / FOLDER / escape_id(tag)
    with rundir.lock():
        number = 1 + sum(1 for e in rundir.log.of_kinds(TASK_EVAL) if e.get("tag") == tag)
        path = folder / f"{number:04d}.json"
        answer["file"] = to_stored(path, spec.project_dir)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, answer)
        rundir.log.append_event(
            TASK_EVAL,
            tag=tag,
            content=answer["content"],
            tasks={row["task_id"]: row["split"] for row in answer["tasks"]},
            trials=answer["trials"],
            rollouts=answer["rollouts"],
            cost_usd=answer["cost_usd"],
            file=answer["file"],
        )
    return answer


def render_table(answer: dict[str, Any]) -> list[str]:
    """``--table``: one line per task, its failure feedback under it."""
    lines = [
        f"{answer['tag']} on {len(answer['tasks'])} task(s) × {answer['trials']} trial(s) "
        f"(diagnosis seeds; not evidence, nothing booked): {answer['file']}",
        f"{'task':<12} {'split':<6} {'passes':>8} {'mean':>7} {'infra':>5}",
    ]
    for row in answer["tasks"]:
        mean = "—" if row["mean_reward"] is None else f"{row['mean_reward']:.3f}"
        passes = f"{row['passes']}/{row['trials']}"
        lines.append(f"{row['task_id']:<12} {row['split']:<6} {passes:>8} {mean:>7} {row['infra_errors']:>5}")
        lines += [f"    {text}" for text in row["failure_feedback"]]
    return lines
