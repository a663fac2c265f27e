"""How often a hill-climb accepts an edit that does not help: the exact gate vs cap-evolve's rule;
then which signal gives the optimizer the better *test* gain: val's failures or train's.

Run: python benchmarks/hill_climb.py [loops] [seed]   (default 300 loops, seed 2026)
     python benchmarks/hill_climb.py signal            (the signal comparison alone)

Simulated at the level of reward matrices (the gate's own :func:`decide`), not pytest sessions:
noisy_agent-like val tasks (40 tasks × 5 trials, each task a hidden log-odds spread like
examples/noisy_agent's: some always pass, some never, most in between) and a scripted optimizer
whose edits have known true effects — a log-odds shift per task category, some 0 (null edits),
some +, some − — proposed in a random order, 10 iterations per loop. Each loop runs twice on the
same proposals and the same random stream: once gated by the default exact gate (one-sided
sign-flip p ≤ α = 0.05, with the null-control floor of two byte-identical copies of the best,
re-drawn whenever the best changes, as the loop does), once by cap-evolve's paired rule
Δ̄ > 1.0·SE. The best's rollouts are drawn once per best and reused, as the run dir does.

Printed per rule: edits accepted, the share of accepted edits whose true effect on the val mean
is ≤ 0 (the false-accept share), the true gain of the final best over the seed, and the ratio of
the false-accept shares (paired / exact).

The signal comparison runs the real loop (``capevolve hill-climb``, real gate sessions) on private
copies of the bundled projects, twice on each with the same scripted optimizer — examples/toy_calc
with its own optimizer.py, examples/noisy_agent with benchmarks/signal_optimizer.py (it guesses
a fix from the failures it is shown) — once ``--signal val`` and once ``--signal train``, then
``capevolve measure`` finalizes each run. Printed per project: the test gain (best − seed on the
sealed test split, from seal.json) of each signal, their difference and ratio, the rollouts each
paid, and what each accepted.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pytest_capevolve._decide.gate import decide
from pytest_capevolve._decide.verdict import GateConfig

N_TASKS, TRIALS, ITERATIONS = 40, 5, 10
CATEGORIES = 4
# Edits: (name, log-odds shift per category); their true val effect is measured exactly below.
EDITS = [
    ("null-a", (0.0, 0.0, 0.0, 0.0)),
    ("null-b", (0.0, 0.0, 0.0, 0.0)),
    ("null-c", (0.0, 0.0, 0.0, 0.0)),
    ("tiny+", (0.15, 0.0, 0.0, 0.0)),
    ("fare-class", (1.6, 1.6, 0.6, 1.6)),
    ("read-policy", (0.5, 0.5, 0.5, 0.5)),
    ("small+", (0.3, 0.3, 0.0, 0.0)),
    ("upsell", (-1.6, -1.6, -1.6, -1.6)),
    ("baggage-first", (-2.5, 0.0, 2.5, 0.0)),
    ("tiny-", (-0.2, -0.2, 0.0, 0.0)),
]
EXACT = GateConfig(mode="exact", alpha=0.05)
PAIRED = GateConfig(mode="paired", k_se=1.0)


def difficulties(rng: random.Random) -> np.ndarray:
    out = []
    for _ in range(N_TASKS):
        kind = rng.random()
        out.append(6.0 if kind < 0.2 else -7.0 if kind < 0.35 else rng.uniform(-2.5, 1.5))
    return np.array(out)


def rates(base: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(base + shifts)))


def true_mean(base: np.ndarray, shifts: np.ndarray) -> float:
    return float(rates(base, shifts).mean())


def draw(base: np.ndarray, shifts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (rng.random((N_TASKS, TRIALS)) < rates(base, shifts)[:, None]).astype(float)


def one_loop(
    config: GateConfig, base: np.ndarray, proposals: list[tuple[str, np.ndarray]], seed: int
) -> tuple[list[float], float]:
    """Run one hill-climb; returns the true effects of the accepted edits, and the final gain."""
    rng = np.random.default_rng(seed)
    ids = [f"n{i:02d}" for i in range(N_TASKS)]
    best_shift = np.zeros(N_TASKS)
    best = draw(base, best_shift, rng)
    nulls: list[float] | None = None
    accepted = []
    for _name, edit in proposals:
        if nulls is None and config.mode == "exact":  # null controls, re-drawn per best
            nulls = [
                decide(
                    draw(base, best_shift, rng), best, tag="n", against="b", task_ids=ids, config=config
                ).delta_mean
                for _ in range(2)
            ]
        shift = best_shift + edit
        cand = draw(base, shift, rng)
        verdict = decide(cand, best, tag="c", against="b", task_ids=ids, config=config, null_deltas=nulls)
        if verdict.decision == "accept":
            accepted.append(true_mean(base, shift) - true_mean(base, best_shift))
            best_shift, best, nulls = shift, cand, None
    return accepted, true_mean(base, best_shift) - true_mean(base, np.zeros(N_TASKS))


def main() -> None:
    loops = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 2026
    master = random.Random(seed)
    category = np.arange(N_TASKS) % CATEGORIES
    totals = {
        name: {"accepted": 0, "harmless_or_worse": 0, "gain": 0.0} for name in ("exact", "paired k=1.0")
    }
    for _ in range(loops):
        base = difficulties(master)
        order = master.sample(EDITS, k=len(EDITS))[:ITERATIONS]
        proposals = [(name, np.array(shifts)[category]) for name, shifts in order]
        loop_seed = master.randrange(2**32)
        for name, config in (("exact", EXACT), ("paired k=1.0", PAIRED)):
            effects, gain = one_loop(config, base, proposals, loop_seed)
            totals[name]["accepted"] += len(effects)
            totals[name]["harmless_or_worse"] += sum(e <= 1e-12 for e in effects)
            totals[name]["gain"] += gain
    print(
        f"seed {seed}; {loops} simulated loops × {ITERATIONS} proposals; {N_TASKS} val tasks × {TRIALS} trials"
    )
    print(f"{'rule':14} {'accepted':>9} {'true effect ≤ 0':>16} {'share':>7} {'mean final gain':>16}")
    share = {}
    for name, t in totals.items():
        share[name] = t["harmless_or_worse"] / t["accepted"] if t["accepted"] else 0.0
        print(
            f"{name:14} {t['accepted']:>9} {t['harmless_or_worse']:>16} {share[name]:>7.3f} "
            f"{t['gain'] / loops:>+16.4f}"
        )
    ratio = share["paired k=1.0"] / share["exact"] if share["exact"] else float("inf")
    print(f"false-accept share, paired k=1.0 / exact: {ratio:.2f}×")


REPO = Path(__file__).resolve().parent.parent
SIGNAL_PROJECTS = {  # project → (its scripted optimizer, iterations)
    "toy_calc": ("optimizer.py", 3),
    "noisy_agent": (str(REPO / "benchmarks" / "signal_optimizer.py"), 4),
}


def capevolve(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest_capevolve._cli.main", *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def signal_loop(name: str, signal: str, scratch: Path) -> dict:
    """One hill-climb on a fresh copy of examples/<name> with ``--signal signal``, finalized."""
    project = scratch / f"{name}-{signal}"
    shutil.copytree(
        REPO / "examples" / name, project, ignore=shutil.ignore_patterns(".capevolve", "__pycache__")
    )
    optimizer, iterations = SIGNAL_PROJECTS[name]
    climb = capevolve(
        "hill-climb", str(project), "--optimizer", f"{sys.executable} {optimizer} {{workdir}} {{prompt}}",
        "--signal", signal, "--max-iterations", str(iterations), "--store", "copy", cwd=project,
    )  # fmt: skip
    if climb.returncode != 0:
        raise SystemExit(
            f"hill-climb {name} --signal {signal} exited {climb.returncode}: {climb.stderr[-800:]}"
        )
    summary = json.loads(climb.stdout)
    measured = capevolve("measure", str(project), "--json", cwd=project)
    if measured.returncode != 0:
        raise SystemExit(f"measure {name} exited {measured.returncode}: {measured.stderr[-800:]}")
    run = project / ".capevolve" / "runs" / summary["run_id"]
    seal = json.loads((run / "seal.json").read_text())
    state = json.loads((run / "state.json").read_text())
    delta = seal.get("delta_vs_seed") or {"mean": 0.0}  # the seed still the best: no gain
    return {
        "test_gain": float(delta["mean"]),
        "accepted": summary["accepted"],
        "rollouts": int(state["spent"]["metric_calls"]),
    }


def signal_comparison() -> None:
    print("\nthe optimizer's signal: test gain of the final best (best − seed, sealed test split)")
    header = f"{'project':12} {'signal':7} {'test gain':>10} {'rollouts':>9}  accepted"
    print(header)
    with tempfile.TemporaryDirectory(prefix="capevolve-signal-") as scratch:
        for name in SIGNAL_PROJECTS:
            found = {s: signal_loop(name, s, Path(scratch)) for s in ("val", "train")}
            for s, r in found.items():
                print(
                    f"{name:12} {s:7} {r['test_gain']:>+10.4f} {r['rollouts']:>9}  {', '.join(r['accepted']) or '—'}"
                )
            val, train = found["val"]["test_gain"], found["train"]["test_gain"]
            ratio = f"{train / val:.2f}×" if val else "— (val gained nothing)"
            print(
                f"{name:12} train − val test gain {train - val:+.4f}; train / val {ratio}; "
                f"train paid {found['train']['rollouts'] - found['val']['rollouts']:+d} rollouts"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["signal"]:
        signal_comparison()
    else:
        main()
        signal_comparison()
