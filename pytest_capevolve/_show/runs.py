"""``capevolve runs``: a project's runs side by side — best, iterations, spend, test sealed (or scored,
or scored elsewhere: another run scored its test tasks, so it can no longer be finalized held out).
Reads each run's ``state.json`` and seal; pays and writes nothing."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from .._store.decisions.state_tally import FORCED_LABEL, labelled_accepts, short
from .._store.files import RunDirError
from .._store.log.event_kinds import DECISION, TEST_SCORED
from .._store.memory import task_keys
from .._store.memory.project_seal import REUSED_LABEL, ScoredTests, scored_tests, shared_with
from .._store.memory.seal import Seal
from .._store.memory.shared_ledger import of_run
from .._store.rundir import RUNS_DIR, RunDir
from .numbers import aligned, usd


def list_runs(project_dir: Path) -> list[dict[str, Any]]:
    """One row per run (oldest first; ``current`` marks the newest, which sessions use)."""
    roots = sorted(p for p in (project_dir / RUNS_DIR).glob("*") if (p / "spec.lock.yaml").is_file())
    rows = []
    project_scored: list[ScoredTests] | None = None  # read once, for the runs without a shared ledger
    for root in roots:
        row: dict[str, Any] = {"run_id": root.name, "run_dir": str(root), "current": root == roots[-1]}
        try:
            rundir = RunDir.opened(root)  # a development build's run: its row says so, nothing read
            state = rundir.state.read_state()
        except RunDirError as exc:
            rows.append({**row, "error": str(exc)})
            continue
        spent = state["spent"]
        seal = Seal(rundir).burned()
        test = "sealed" if seal is None else "scored (reused)" if _reused(rundir, seal) else "scored"
        taken: list[str] = []
        if seal is None:
            if project_scored is None and of_run(rundir) is None:
                project_scored = scored_tests(project_dir)
            taken = scored_elsewhere(project_dir, rundir, project_scored)
            test = "scored elsewhere" if taken else test
        labels = labelled_accepts(rundir.log.of_kinds(DECISION))
        rows.append(
            {
                **row,
                "best": state["best_id"],
                "best_forced": labels.get(state["best_id"]) == FORCED_LABEL,
                "best_label": labels.get(state["best_id"]),
                "iterations": int(state["iterations"]),
                "stall": int(state["stall"]),
                "rollouts": int(spent.get("metric_calls", 0)),
                "usd": round(float(spent.get("usd", 0.0)) + float(spent.get("optimizer_usd", 0.0)), 6),
                "test": test,
                "test_scored_by": taken,
                "notices": list(rundir.notices),
            }
        )
    return rows


def render_runs(rows: list[dict[str, Any]]) -> list[str]:
    """The table; a labelled best reads ``TAG (forced)``, ``TAG (adopted)`` or ``TAG (re-gated after a
    harness change)``."""
    header = ("run", "best", "iterations", "rollouts", "$ spent", "test", "")
    body = []
    for row in rows:
        if "error" in row:
            body.append((row["run_id"], "?", "?", "?", "?", "?", f"unreadable: {row['error']}"))
            continue
        best = f"{row['best']} ({_short(row['best_label'])})" if row.get("best_label") else str(row["best"])
        spent = (str(row["iterations"]), str(row["rollouts"]), usd(row["usd"], row["rollouts"]))
        body.append((row["run_id"], best, *spent, row["test"], "current" if row["current"] else ""))
    return aligned([header, *body], left=2) + [_taken_line(row) for row in rows if row.get("test_scored_by")]


def scored_elsewhere(
    project_dir: Path, rundir: RunDir, project_scored: list[ScoredTests] | None = None
) -> list[str]:
    """The other runs that scored some of this unscored run's test tasks: its finalize is refused
    (the project's test seal), so its ``sealed`` would promise a held-out score it cannot give.
    ``project_scored``: the project's scored test tasks, when the caller has read them already."""
    try:
        test_ids = [str(t) for t in (rundir.splits() or {}).get("test", [])]
    except (RunDirError, OSError, ValueError):
        return []
    if not test_ids:
        return []
    keys, ledger = task_keys.recorded(rundir), of_run(rundir)
    scored = project_scored if ledger is None and project_scored is not None else None
    if scored is None:
        scored = scored_tests(project_dir, keys.values(), ledger)
    return [named for named, _ in shared_with(scored, rundir.run_id, test_ids, keys)]


def _taken_line(row: dict[str, Any]) -> str:
    """The way on for a run whose test tasks another run scored."""
    project = Path(row["run_dir"]).parents[2]
    return (
        f"{row['run_id']}: its test tasks were scored by run {', '.join(row['test_scored_by'])}, so its "
        "finalize is refused (no longer held out); `pytest --capevolve-finalize "
        f"{shlex.quote(str(project))} --capevolve-run-id {row['run_id']} --capevolve-test-reused` scores it "
        f"labelled '{REUSED_LABEL}'"
    )


def _short(label: str, width: int = 32) -> str:
    """A label as the table's ``best`` column shows it (``adopted``, ``forced``), within ``width``: the
    table fits 100 columns; ``capevolve measure``, report.md and ``--json`` say it in full."""
    head = short(label).partition(": ")[0]
    return head if len(head) <= width else head[: width - 1] + "…"


def _reused(rundir: RunDir, seal: dict[str, Any]) -> bool:
    """Whether the run scored test tasks another run had scored (acknowledged at finalize):
    from seal.json, or from the log's event when the file is gone."""
    if seal.get("test_reused"):
        return True
    return any(e.get("test_reused") for e in rundir.log.of_kinds(TEST_SCORED))
