"""What the inspect_ai bridge's batches save: one ``eval_async`` for the rollouts in flight
against one ``eval_async`` per rollout, on examples/inspect_task's mock model.

Runs the same rollouts (12 samples × one candidate × a seed per round) both ways, alternated
in rounds so load on a shared machine hits both alike, after one warm-up eval (inspect's first
eval in a process loads most of it). Prints per-rollout medians, the ratio of the per-rollout
path to the batched one, and checks the records agree.

    python benchmarks/inspect_bridge.py [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
import warnings
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "inspect_task"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # inspect's own deprecation and resource warnings
    spec = importlib.util.spec_from_file_location("bench_inspect_adapter", EXAMPLE / "adapter.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    adapter = module.ArithmeticAdapter(EXAMPLE)
    tasks = adapter.tasks("all")
    folder = EXAMPLE / "candidates" / "terse"

    async def batched(seed):
        return await asyncio.gather(*(adapter.run_target(t, folder, seed=seed) for t in tasks))

    async def one_by_one(seed):
        return [await adapter.run_target(t, folder, seed=seed) for t in tasks]

    asyncio.run(batched(-1))  # warm-up
    times: dict[str, list[float]] = {"batched": [], "one eval per rollout": []}
    same = True
    for seed in range(args.rounds):
        results = {}
        for name, run in (("batched", batched), ("one eval per rollout", one_by_one)):
            started = time.perf_counter()
            results[name] = asyncio.run(run(seed))
            times[name].append((time.perf_counter() - started) / len(tasks))
        plain = [
            [{k: v for k, v in vars(r).items() if k != "seconds"} for r in rs] for rs in results.values()
        ]
        same = same and plain[0] == plain[1]
    base = statistics.median(times["batched"])
    print(f"{len(tasks)} rollouts × {args.rounds} rounds (median per rollout)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median * 1e3:8.1f} ms   ×{median / base:5.2f} the batched path")
    print(f"records identical both ways: {same}")


if __name__ == "__main__":
    main()
