"""``capevolve multirep TAG [--against OTHER]``: the comparison's error across whole runs.

Per replicate block (``pytest --capevolve-block B``) holding both tags: the paired Δ̄ over
tasks as the gate computes it, its SE and coverage. Across the blocks covering ``min_coverage``:
the mean Δ̄, its SE and a t interval (:func:`.._stats.intervals.replicate_summary`), and
whether the blocks agree in sign. Evidence only: writes and books nothing, and the gate reads
block 0 alone. Pays no rollout."""

from __future__ import annotations

import math
import shlex
from typing import Any, NotRequired, TypedDict, cast

from .. import _stats as stats
from .._policy.booking.commit_checks import source_folder
from .._project.blocks import first_trial
from .._project.candidate import SEED_TAG, null_control_of
from .._project.spec import Spec
from .._project.way_on import pasteable, shown
from .._show.numbers import num
from .._stats.intervals import replicate_summary
from .._store.readers.evidence import index_records, reward_matrix
from .._store.rundir import RunDir, rollouts_of
from .._store.snapshots import unknown_tag
from ..exitcodes import Refusal

LEVEL = 0.95


class BlockRow(TypedDict):
    """One replicate block: its paired Δ̄, SE and coverage, and whether it is used (``why`` not)."""

    block: int
    trial_seeds: NotRequired[str]
    n_tasks: NotRequired[int]
    coverage: NotRequired[float]
    delta_mean: NotRequired[float | None]
    paired_se: NotRequired[float | None]
    used: bool
    why: NotRequired[str]


class AcrossBlocks(TypedDict):
    """The used blocks' Δ̄ summarized: mean, SE, a t interval, sign agreement, drift."""

    blocks: int
    mean: float
    se: float | None
    df: int
    ci: list[float] | None
    level: float
    p_value: float | None
    positive: int
    negative: int
    agreeing: int
    agree: bool
    sd: float | None
    paired_se: float | None
    drift_ratio: float | None


class MultirepAnswer(TypedDict):
    """The ``capevolve multirep`` object (docs/how-to/replicate-blocks.md says what its keys mean)."""

    run_id: str
    tag: str
    against: str
    blocks: list[BlockRow]
    source: str
    across: AcrossBlocks
    status: str
    reason: str


def multirep(spec: Spec, rundir: RunDir, tag: str, against: str | None = None) -> MultirepAnswer:
    """The ``capevolve multirep`` object (docs/how-to/replicate-blocks.md says what its keys mean)."""
    against_given, against = against, against or rundir.state.best()
    known = set(rundir.snapshots.known_tags())
    for name in (tag, against):
        if name not in known:
            raise Refusal(unknown_tag(name, rundir.run_id, known, rundir.project_dir))
    if tag == against:
        raise Refusal(_with_itself(tag, known, rundir, defaulted=against_given is None))
    val_ids = list((rundir.splits() or {}).get("val", []))
    records = rundir.rollouts.indexed_rollouts("val", [tag, against], block=None)
    rows: list[BlockRow] = []
    for block in sorted({r.block for r in records}):
        by_tag = index_records(records, block)
        if tag not in by_tag or against not in by_tag:
            rows.append({"block": block, "used": False, "why": "only one of the two tags was evaluated"})
            continue
        candidate = reward_matrix(by_tag[tag], val_ids, spec.num_trials)
        best = reward_matrix(by_tag[against], val_ids, spec.num_trials)
        deltas, mask = stats.paired_deltas(candidate, best)
        coverage = float(mask.mean()) if mask.size else 0.0
        delta, se = stats.mean_se(deltas)
        row: BlockRow = {
            "block": block,
            "trial_seeds": f"base_seed + {first_trial(block)} + k, k < {spec.num_trials}",
            "n_tasks": int(deltas.size),
            "coverage": coverage,
            "delta_mean": delta,
            "paired_se": se,
            "used": delta is not None and coverage >= spec.min_coverage,
        }
        if not row["used"]:
            row["why"] = f"paired coverage {coverage:.0%} is below min_coverage {spec.min_coverage:.0%}"
        rows.append(row)
    used = [r for r in rows if r["used"]]
    if not used:
        raise Refusal(
            f"no block has val rollouts of both {tag!r} and {against!r} covering min_coverage "
            f"{spec.min_coverage:.0%}; evaluate them: {evaluating_both(rundir, tag, against, block=0)}"
        )
    # a used block has a Δ̄ (``used`` requires one), so this is every used block's
    summary = replicate_summary([d for r in used if (d := r.get("delta_mean")) is not None], level=LEVEL)
    paired = [se for r in used if (se := r.get("paired_se")) is not None]
    paired_se = math.sqrt(sum(se * se for se in paired) / len(paired)) if paired else None
    copied = ("blocks", "mean", "se", "df", "p_value", "positive", "negative", "agreeing", "agree", "sd")
    across = cast(
        AcrossBlocks,
        {
            **{key: getattr(summary, key) for key in copied},
            "ci": None if summary.ci is None else list(summary.ci),
            "level": LEVEL,
            "paired_se": paired_se,
            # ≈ 1 when the paired SE accounts for how much one run's Δ̄ moves from run to run;
            # well above 1: run-to-run error that a single run's paired SE cannot see
            "drift_ratio": None if summary.sd is None or not paired_se else summary.sd / paired_se,
        },
    )
    status, reason = _resolution(summary)
    if status == "single_block":  # the next block's session, for both tags
        block = max(r["block"] for r in used) + 1
        reason = reason.replace("EVALUATE", evaluating_both(rundir, tag, against, block=block))
    return MultirepAnswer(
        run_id=rundir.run_id,
        tag=tag,
        against=against,
        blocks=rows,
        source=f"{rollouts_of('val', tag)}, against those whose tag is {against}; block B = trial // 1000000",
        across=across,
        status=status,
        reason=reason,
    )


def _with_itself(tag: str, known: set[str], rundir: RunDir, *, defaulted: bool) -> str:
    """The refusal of a tag compared with itself (the best, when ``--against`` defaulted to it), its way on
    the same command against another tag: the seed first, what the best was chosen over."""
    others = sorted(
        (t for t in known if t != tag and null_control_of(t) is None), key=lambda t: (t != SEED_TAG, t)
    )
    way = (
        pasteable(
            f"`capevolve multirep {shlex.quote(tag)} PROJECT --against {shlex.quote(others[0])}`",
            rundir.project_dir,
        )
        if others
        else "--against another tag"
    )
    best = " (it is the best)" if defaulted else ""
    return f"{tag!r} would be compared with itself{best}; compare it with another: {way}"


def evaluating_both(rundir: RunDir, tag: str, against: str, *, block: int) -> str:
    """The session that evaluates ``against`` and ``tag`` in replicate ``block``, each from the folder
    it was registered from, under its tag: pasted, it gives multirep the rollouts it asks for."""
    words = ["pytest", "--capevolve-run", "PROJECT"]
    for name in (against, tag):
        words += ["--capevolve-candidate", shown(source_folder(rundir, name)), "--capevolve-tag", name]
    words += ["--capevolve-block", str(block)] if block else []
    return pasteable(shlex.join(words), rundir.project_dir)


def _resolution(summary: Any) -> tuple[str, str]:
    """One of ``single_block``, ``not_resolvable``, ``resolved``, ``unresolved``, with its sentence."""
    r = summary.blocks
    if r < 2:
        return (
            "single_block",
            "one block: no across-run SE yet; evaluate another (EVALUATE) to see run-to-run error",
        )
    if summary.agreeing < 2:
        return (
            "not_resolvable",
            f"not resolvable at this budget: only {summary.agreeing} of {r} blocks agree in sign "
            f"(across-block Δ̄ = {summary.mean:+.4f}, SE {summary.se:.4f}); run-to-run error is as "
            "large as the effect",
        )
    low, high = summary.ci
    if summary.ci_excludes_zero:
        return (
            "resolved",
            f"{summary.agreeing} of {r} blocks agree; across-block Δ̄ = {summary.mean:+.4f}, SE "
            f"{summary.se:.4f}, {LEVEL:.0%} t interval [{low:+.4f}, {high:+.4f}] (df {summary.df}) "
            "excludes 0",
        )
    return (
        "unresolved",
        f"{summary.agreeing} of {r} blocks agree in sign, but the {LEVEL:.0%} t interval "
        f"[{low:+.4f}, {high:+.4f}] (df {summary.df}) includes 0: small against run-to-run error; "
        "more blocks would tell",
    )


def render(answer: dict[str, Any]) -> list[str]:
    lines = [f"capevolve multirep {answer['tag']!r} vs {answer['against']!r} — run {answer['run_id']}"]
    lines.append(f"{'block':>5}  {'tasks':>5}  {'coverage':>8}  {'Δ̄':>8}  {'paired SE':>9}")
    for row in answer["blocks"]:
        if "n_tasks" not in row:
            lines.append(f"{row['block']:>5}  left out: {row['why']}")
            continue
        mark = "" if row["used"] else f"  left out: {row['why']}"
        lines.append(
            f"{row['block']:>5}  {row['n_tasks']:>5}  {row['coverage']:>8.0%}  "
            f"{num(row['delta_mean'], '+.4f'):>8}  {num(row['paired_se'], '.4f'):>9}{mark}"
        )
    across = answer["across"]
    lines.append(
        f"across {across['blocks']} block(s): Δ̄ {num(across['mean'], '+.4f')}, SE "
        f"{num(across['se'], '.4f')}, signs +{across['positive']} −{across['negative']}"
    )
    ratio = across["drift_ratio"]
    if ratio is not None:
        lines.append(
            f"one run's Δ̄ moves by SD {num(across['sd'], '.4f')} from block to block; its paired SE says "
            f"{num(across['paired_se'], '.4f')} (ratio {ratio:.2f}"
            + ("; run-to-run error the paired SE cannot see)" if ratio > 2 else ")")
        )
    lines.append(f"{answer['status']}: {answer['reason']}")
    return lines
