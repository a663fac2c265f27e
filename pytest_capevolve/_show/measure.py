"""The run's one honest table: seed vs best on val, train and test, with its refusals stated.

Reads persisted rollouts and the seal, pays nothing; decides what may be said about the numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import _stats as stats
from .._decide.basis import SCREENED
from .._decide.calibration import Calibration, calibration
from .._decide.screen import ledger as screen_ledger
from .._decide.screen import ledger_line
from .._engine import confinement as boundary
from .._project import way_on
from .._project.candidate import SEED_TAG, null_control_of
from .._project.spec import Spec
from .._store.decisions.state_tally import FORCED_LABEL, labelled_accepts, short
from .._store.log.event_kinds import BEST_CHANGED, CANDIDATE_REGISTERED, DECISION, GROWN, SCREEN, VERDICT
from .._store.log.log_views import digest
from .._store.memory.project_seal import REUSED_LABEL
from .._store.memory.seal import Seal
from .._store.readers.evidence import ByTag, index_records, reward_matrix, val_paid_by_tag
from .._store.rundir import RunDir, rollouts_of
from .numbers import interval, num, usd


def paired_summary(candidate: np.ndarray, base: np.ndarray, *, seed: int) -> dict[str, Any] | None:
    """Mean paired delta candidate − base with its SE, 95% CI (:func:`stats.t_ci`) and one-sided
    sign-flip p; None when no task is valid on both sides."""
    deltas, _ = stats.paired_deltas(candidate, base)
    if deltas.size == 0:
        return None
    mean, se = stats.mean_se(deltas)
    ci = stats.t_ci(deltas)
    test = stats.sign_flip_test(candidate, base, seed=seed)
    return {
        "n": int(deltas.size),
        "mean": mean,
        "se": se,
        "ci": None if ci is None else [ci[0], ci[1]],
        "p_one_sided": test.p_value,
    }


@dataclass
class ArmLine:
    """One row of the table: an arm's numbers on a split, or a stated refusal (``note``)."""

    split: str
    arm: str
    tag: str
    mean: float | None = None
    se: float | None = None
    tasks: int = 0
    trials: int = 0
    coverage: float | None = None
    note: str = ""
    source: str = ""


@dataclass
class DeltaLine:
    split: str
    summary: dict[str, Any] | None
    source: str


@dataclass
class Measurement:
    """Everything the honest table says, with where each number came from."""

    run_id: str
    run_dir: Path
    best: str
    arms: list[ArmLine] = field(default_factory=list)
    deltas: list[DeltaLine] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # refusals and caveats, said plainly
    lineage: list[dict[str, Any]] = field(default_factory=list)
    spend: dict[str, Any] = field(default_factory=dict)
    screening: dict[str, Any] = field(default_factory=dict)
    calibration: Calibration | None = None  # the null controls' accept tally
    # whether candidate code and the optimizer were confined: {"candidate_code": …, "optimizer": …}
    confinement: dict[str, str] = field(default_factory=dict)
    # candidates paid on val that no verdict judged (:func:`unjudged_tags`)
    unjudged: list[str] = field(default_factory=list)

    @property
    def null_result(self) -> bool:
        """The best is the seed: the table shows the seed alone (a null result only when nothing is
        left :attr:`unjudged`)."""
        return self.best == SEED_TAG


SETTLING = (VERDICT, SCREEN, GROWN, DECISION)  # a tag with one of these was judged
UNJUDGED_KINDS = (*SETTLING, CANDIDATE_REGISTERED)  # all :func:`unjudged_tags` reads of the log


def unjudged_tags(rundir: RunDir, events: list[dict[str, Any]]) -> list[str]:
    """The candidates a session paid on val that no verdict, screen, grow or decision followed: a gate
    cut off (Ctrl-C, a kill) before any verdict, or an evaluation without a gate. Nothing was decided
    about them, so a best still the seed is no null result while one is left (``events``: the log's
    events of :data:`UNJUDGED_KINDS` at least)."""
    settled = {str(e.get("tag")) for e in events if e.get("kind") in SETTLING}
    registered = {
        str(e.get("tag")): e.get("content_hash") for e in events if e.get("kind") == CANDIDATE_REGISTERED
    }
    # the seed's bytes again (a --capevolve-rerun's fresh tag) are no candidate
    seed = registered.pop(SEED_TAG, None)
    tags = [t for t, h in registered.items() if t not in settled and h != seed and null_control_of(t) is None]
    if not tags:
        return []
    records = index_records(rundir.rollouts.indexed_rollouts("val", tags))
    return [tag for tag in tags if records.get(tag)]  # paid on val (a train-only evaluation is no gate)


def unjudged_label(rundir: RunDir, tags: list[str], *, finalized: bool) -> str:
    """A best still the seed while ``tags`` are unjudged: not a null result, and the way on."""
    said = way_on.unjudged(tags[0], rundir.run_id, rundir.project_dir, finalized=finalized)
    also = f" (never judged either: {', '.join(map(repr, tags[1:]))})" if tags[1:] else ""
    return f"not a null result: nothing was decided — {said}{also}"


def measure(
    spec: Spec, rundir: RunDir, known: dict[str, ByTag] | None = None, *, train_note: str | None = None
) -> Measurement:
    """Read the run and decide what may be said; never pays, never opens the seal. ``known``:
    split → records the caller already indexed; ``train_note``: why train has no numbers."""
    splits = rundir.splits() or {"train": [], "val": [], "test": []}
    state = rundir.state.read_state()
    events, rollouts_by_split = digest(rundir)  # the log less its rollout lines, and their count
    best = str(state["best_id"])
    result = Measurement(rundir.run_id, rundir.root, best)
    tags = [SEED_TAG] if best == SEED_TAG else [SEED_TAG, best]
    if result.null_result:
        result.unjudged = unjudged_tags(rundir, events)
    if result.unjudged:  # a gate cut off decided nothing: "no improvement" would be a finding it never made
        finalized = Seal(rundir).closed() is not None
        result.labels.append(unjudged_label(rundir, result.unjudged, finalized=finalized))
    else:
        result.labels.append(
            "null result: no candidate was accepted, the seed is still the best; there is no improvement "
            "to report"
            if result.null_result
            else "selected on val: the best was chosen for its val score, so its val gain is optimistic; "
            "only the test row is held out"
        )
    for split in ("val", "train"):
        records = (known or {}).get(split)
        if records is None and splits[split]:
            records = index_records(rundir.rollouts.indexed_rollouts(split, tags))
        _persisted_split(result, split, list(splits[split]), records or {}, spec, train_note)
    _test_split(result, rundir, splits)
    result.lineage = _lineage(rundir, events)
    label = labelled_accepts(events).get(best)
    if label == FORCED_LABEL:  # not a measured improvement: said first, wherever the table is shown
        result.labels.insert(
            0,
            f"{FORCED_LABEL}: the best {best!r} was booked with --force although its gate said "
            f"{(rundir.verdicts.verdict(best) or {}).get('decision', 'nothing')}; its gain is not a gate's",
        )
    elif label is not None:  # decided again on bytes another run had decided
        said = label.partition(" — ")[2]  # an adopted accept's label has no short form: said once
        result.labels.insert(
            0, f"{short(label)}: the best {best!r} is {said}" if said else f"the best {best!r} is {label}"
        )
    saved_each = len(splits["val"]) * spec.num_trials  # the val rollouts a candidate refused unrun saved
    verdicts = rundir.verdicts.checked_all()  # one pass: each file read once, held to its logged event
    result.spend, result.screening = _spend(rundir, verdicts, events, rollouts_by_split, state, saved_each)
    result.calibration = calibration(events, spec.gate_alpha)
    if result.calibration["alarm"]:
        result.labels.insert(0, result.calibration["text"])
    result.confinement = confinement_of(verdicts, events)
    return result


def confinement_of(verdicts: Mapping[str, dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, str]:
    """What the verdicts (``Verdicts.checked_all``'s) said of candidate code and the decisions of the
    optimizer: confined when every one was, else the first unconfined label and what it covers."""
    said: dict[str, str] = {}
    for tag, verdict in verdicts.items():
        label = (verdict.get("confinement") or {}).get("candidate_code")
        if isinstance(label, str) and not label.startswith("no candidate code ran"):
            said[tag] = label
    optimizers = [
        str(e["confinement"]["optimizer"])
        for e in events
        if e.get("kind") == DECISION
        and isinstance(e.get("confinement"), dict)
        and e["confinement"].get("optimizer")
    ]
    return {
        "candidate_code": _of_many(said, "verdicts"),
        "optimizer": _of_many(dict(enumerate(optimizers)), "decisions", boundary.optimizer()),
    }


def _of_many(said: dict[Any, str], what: str, otherwise: str | None = None) -> str:
    if not said:
        return otherwise or f"not said by any of the run's {what} (written before the boundary, or none yet)"
    loose = {k: v for k, v in said.items() if not v.startswith("confined")}
    if not loose:
        return min(said.values())
    if len(loose) == len(said) and len(set(loose.values())) == 1:
        return next(iter(loose.values()))
    if what != "verdicts":
        return f"{next(iter(loose.values()))} (in {len(loose)} of {len(said)} {what})"
    return f"{next(iter(loose.values()))} (verdicts of {', '.join(sorted(map(str, loose)))})"


def _persisted_split(
    result: Measurement, split: str, task_ids: list[str], records: ByTag, spec: Spec, note: str | None
) -> None:
    if not task_ids:
        result.arms.append(ArmLine(split, "—", "—", note="empty: this split has no tasks"))
        return
    matrices: dict[str, np.ndarray] = {}
    trials = spec.num_trials
    tags = [SEED_TAG] if result.null_result else [SEED_TAG, result.best]
    for tag in tags:
        arm = "seed" if tag == SEED_TAG else "best"
        source = rollouts_of(split, tag)
        if not records.get(tag):
            if split == "val":
                result.arms.append(ArmLine(split, arm, tag, tasks=len(task_ids), note="not evaluated"))
            continue
        matrix = reward_matrix(records[tag], task_ids, trials)
        matrices[tag] = matrix
        mean, se = stats.mean_se(stats.task_means(matrix))
        result.arms.append(
            ArmLine(split, arm, tag, mean, se, len(task_ids), trials, stats.coverage(matrix), source=source)
        )
    if split == "train" and not matrices:
        result.arms.append(ArmLine(split, "—", "—", tasks=len(task_ids), note=note or NO_TRAIN_NOTE))
    if len(matrices) == 2:
        summary = paired_summary(matrices[tags[1]], matrices[SEED_TAG], seed=spec.base_seed)
        result.deltas.append(DeltaLine(split, summary, f"rollouts/{split}/ (paired by task)"))


def _test_split(result: Measurement, rundir: RunDir, splits: dict[str, Any]) -> None:
    test_ids = set(splits["test"])
    if not test_ids:
        result.arms.append(ArmLine("test", "—", "—", note="empty: no held-out tasks"))
        result.labels.append("no holdout: the test split is empty, so no number here is held-out")
        return
    overlap = test_ids & (set(splits["val"]) | set(splits["train"]))
    if overlap:
        result.labels.append(
            f"fit metric: the test split shares {len(overlap)} of its {len(test_ids)} tasks with "
            "val/train, so its score measures fit to data the search saw, not held-out performance"
        )
    sealed = Seal(rundir).burned()
    if sealed is None:
        result.arms.append(
            ArmLine("test", "best", result.best, tasks=len(test_ids), note="sealed: not finalized yet")
        )
        return
    if sealed.get("seal_file_missing"):  # the log burned the seal; the file with its numbers is gone
        result.labels.append(
            f"seal.json is missing: the log records the test split scored (event seq "
            f"{sealed.get('event_seq')}); it is not scored again, and its table is gone with the file"
        )
        result.arms.append(
            ArmLine("test", "best", str(sealed["best"]["tag"]), note="scored once; seal.json deleted")
        )
        return
    reused = sealed.get("test_reused")
    if reused:  # acknowledged at finalize: said first, on every view this measurement feeds
        before = ", ".join(f"run {r.get('run_id')}" for r in reused.get("scored_before", []))
        result.labels.insert(0, f"{REUSED_LABEL}: these test tasks were scored before ({before})")
    reuse = f" — {REUSED_LABEL}" if reused else ""
    for arm in ("seed", "best"):
        numbers = sealed.get(arm)
        if numbers is None:
            continue
        source = f"seal.json ({rollouts_of('test', numbers['tag'])}){reuse}"
        figures = {key: numbers[key] for key in ("mean", "se", "tasks", "trials", "coverage")}
        result.arms.append(ArmLine("test", arm, numbers["tag"], **figures, source=source))
    if sealed.get("delta_vs_seed") is not None:
        result.deltas.append(DeltaLine("test", sealed["delta_vs_seed"], "seal.json"))
    if sealed["best"]["tag"] != result.best:
        result.labels.append(
            f"the test score is of {sealed['best']['tag']!r}, the best when finalize ran; "
            f"the best is now {result.best!r}"
        )


def _lineage(rundir: RunDir, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = []
    labels = labelled_accepts(events)
    for event in events:
        if event.get("kind") != BEST_CHANGED:
            continue
        tag = str(event["best_id"])
        verdict = rundir.verdicts.checked(tag) or {}
        reason = verdict.get("reason", "(verdict file missing)")
        steps.append(
            {
                "from": event.get("previous"),
                "to": tag,
                "forced": labels.get(tag) == FORCED_LABEL,
                "label": labels.get(tag),
                "reason": f"{labels[tag]} (the gate: {reason})" if tag in labels else reason,
                "p_value": verdict.get("p_value"),
                "delta_mean": verdict.get("delta_mean"),
                "source": f"verdicts/{tag}.json",
            }
        )
    return steps


def _spend(
    rundir: RunDir,
    verdicts: Mapping[str, dict[str, Any]],
    events: list[dict[str, Any]],
    paid: dict[str, int],
    state: dict[str, Any],
    saved_each: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    spent = state["spent"]
    spend = {
        "rollouts_by_split": paid,
        "metric_calls": spent["metric_calls"],
        "usd": spent["usd"],  # the runner's
        # what proposing cost, as booked with the decisions: max_usd counts it too
        "optimizer_usd": float(spent.get("optimizer_usd", 0.0)),
        "optimizer_tokens": int(spent.get("optimizer_tokens", 0)),
        "total_usd": round(float(spent["usd"]) + float(spent.get("optimizer_usd", 0.0)), 6),
        "source": "events.jsonl (rollout lines), state.json (spent)",
    }
    refused = [
        {"tag": verdict["tag"], "basis": verdict["basis"]}
        for verdict in verdicts.values()
        if verdict.get("basis") in SCREENED
    ]
    screens = [e for e in events if e.get("kind") == SCREEN]
    saved = len(refused) * saved_each  # tamper and leak checks and microcases cost no rollout
    subset = screen_ledger(screens, val_paid_by_tag(rundir, screens))
    return spend, {"refused": refused, "cost": 0, "saved": saved, "net": saved, "subset": subset}


NO_TRAIN_NOTE = "not evaluated: the run holds no train rollouts (capevolve measure --train auto pays them)"


# -- rendering ----------------------------------------------------------------------------------


def _delta_text(line: DeltaLine) -> str:
    s = line.summary
    if s is None:
        return "no task valid on both sides"
    ci = interval(s["ci"])
    p = num(s["p_one_sided"], ".4g")
    return f"{s['mean']:+.4f} (SE {num(s['se'], '.4f')}, 95% CI {ci}, n = {s['n']}, one-sided p = {p})"


def delta_lines(m: Measurement) -> list[str]:
    """``best − seed on test: +0.3519 (SE …, 95% CI […], n = 18, one-sided p = …)``, one per split."""
    return [f"best − seed on {d.split}: {_delta_text(d)}" for d in m.deltas]


def table_rows(m: Measurement) -> list[tuple[str, ...]]:
    header = ("split", "arm", "tag", "mean", "SE", "tasks", "trials", "coverage", "from")
    rows: list[tuple[str, ...]] = [header]
    for a in m.arms:
        if a.note:
            rows.append((a.split, a.arm, a.tag, a.note, "", "", "", "", a.source))
        else:
            cov = "—" if a.coverage is None else f"{a.coverage:.0%}"
            rows.append(
                (a.split, a.arm, a.tag, num(a.mean), num(a.se), str(a.tasks), str(a.trials), cov, a.source)
            )
    return rows


def _best_label(m: Measurement) -> str | None:
    return next((s["label"] for s in m.lineage if s.get("label") and s["to"] == m.best), None)


def _subset_text(m: Measurement) -> str | None:
    ledger = m.screening.get("subset") or {}
    return ledger_line(ledger) if ledger.get("screens") else None


def render_text(m: Measurement) -> list[str]:
    header, *body = table_rows(m)
    numeric = [r for r in body if r[4]]  # a note row leaves the numeric cells blank
    widths = [max(len(r[i]) for r in [header, *(body if i < 3 else numeric)]) for i in range(9)]

    def fmt(row: tuple[str, ...]) -> str:
        if row is not header and not row[4]:
            return "  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=False)) + "  " + row[3]
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    label = _best_label(m)
    forced = f" ({short(label)})" if label else ""
    lines = [f"capevolve measure — run {m.run_id}; best {m.best!r}{forced}", "", fmt(header)]
    lines += [fmt(r) for r in body]
    lines += [f"best − seed on {d.split}: {_delta_text(d)}  [{d.source}]" for d in m.deltas]
    lines += [f"NOTE {label}" for label in m.labels]
    if m.confinement:
        lines.append(
            f"candidate code: {m.confinement['candidate_code']}; optimizer: {m.confinement['optimizer']}"
        )
    if subset := _subset_text(m):
        lines.append(subset)
    return lines


def render_markdown(m: Measurement) -> str:
    label = _best_label(m)
    forced = f" ({label})" if label else ""
    out = [f"# capevolve report — run {m.run_id}", "", f"Best: `{m.best}`{forced}.", ""]
    if m.confinement:
        out += [
            f"Candidate code: {m.confinement['candidate_code']}. Optimizer: {m.confinement['optimizer']}.",
            "",
        ]
    out += [f"> **{label.split(':')[0]}**:{label.partition(':')[2]}" for label in m.labels]
    if m.labels:
        out.append("")
    out += ["## The table", ""]
    rows = table_rows(m)
    out += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(c.replace("|", "\\|") if c else " " for c in r) + " |" for r in rows[1:]]
    out.append("")
    out += [f"- best − seed on **{d.split}**: {_delta_text(d)} — from `{d.source}`" for d in m.deltas]
    out += ["", "## Accepted lineage", ""]
    if not m.lineage:
        out.append("None: no candidate was accepted in this run.")
    out += [f"1. `{s['from']}` → `{s['to']}`: {s['reason']} (from `{s['source']}`)" for s in m.lineage]
    out += ["", "## Spend", ""]
    by_split = ", ".join(f"{k} {v}" for k, v in sorted(m.spend["rollouts_by_split"].items())) or "none"
    spend = m.spend
    out.append(
        f"- rollouts paid: {by_split}; metric calls {spend['metric_calls']}; USD {spend['total_usd']:.4f} "
        f"(runner {usd(spend['usd'], spend['metric_calls'])} + optimizer {spend['optimizer_usd']:.4f}, "
        f"{spend['optimizer_tokens']} optimizer tokens)"
    )
    out.append(f"  (from {spend['source']})")
    s = m.screening
    refused = ", ".join("{tag} ({basis})".format(**r) for r in s["refused"]) or "none"
    out.append(
        f"- screening: {len(s['refused'])} candidate(s) refused before any rollout ({refused}); "
        f"cost {s['cost']} rollouts, saved {s['saved']}, net {s['net']:+d} (from `verdicts/*.json`)"
    )
    if m.calibration:
        out.append(f"- calibration: {m.calibration['text']} (from `events.jsonl` null_gated lines)")
    if subset := _subset_text(m):
        out.append(f"- {subset} (from `screens/*.json`, events.jsonl `screen` lines)")
    out += ["", f"Run dir: `{m.run_dir}`. Every path above is relative to it.", ""]
    return "\n".join(out)
