"""What a rollout of examples/openai_agent costs beyond the model: its HTTP round trip.

The example's adapter runs rollouts against the loopback stand-in (standin_server.py, a
thread on 127.0.0.1) three ways, alternated in rounds so load on this shared machine hits all
alike: (a) the stand-in's answer computed in-process (the baseline: no HTTP), (b) one HTTP
round trip per rollout, (c) every request first rate-limited once (429, retry-after-ms: 1), then
retried by the openai client. Prints per-rollout medians and their ratios to (a), and checks the measured cost
equals the stand-in's token counts × price.

    python benchmarks/openai_agent.py [--rollouts N] [--rounds R]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "openai_agent"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_openai_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server_mod, adapter_mod = _module("standin_server"), _module("adapter")
    server = server_mod.StandIn().start()
    os.environ["OPENAI_BASE_URL"] = server.base_url
    os.environ["OPENAI_API_KEY"] = "bench"
    adapter = adapter_mod.OpenAIChatAdapter(EXAMPLE)
    prompt = (EXAMPLE / "candidates" / "terse" / "prompt.md").read_text()
    tasks = adapter.tasks("all")
    work = [(tasks[i % len(tasks)], i) for i in range(args.rollouts)]

    def in_process() -> None:
        for task, seed in work:
            server_mod.answer(prompt, task.input, seed)

    def over_http() -> None:
        for task, seed in work:
            assert not adapter.run_target(task, EXAMPLE / "candidates" / "terse", seed=seed).error

    times: dict[str, list[float]] = {"in-process": [], "http": [], "http, 429 then retry": []}
    try:
        for _ in range(args.rounds):
            for name, run, fault in (
                ("in-process", in_process, None),
                ("http", over_http, None),
                ("http, 429 then retry", over_http, lambda body, attempt: 429 if attempt == 0 else None),
            ):
                server.fault, server.attempts = fault, {}
                started = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - started) / args.rollouts)
        cost = sum(
            adapter.settings.cost_usd({"prompt_tokens": p, "completion_tokens": c}) for p, c in server.usage
        )
        ledger = sum(p * 0.15 + c * 0.60 for p, c in server.usage) / 1e6
    finally:
        server.stop()
    base = statistics.median(times["in-process"])
    print(f"{args.rollouts} rollouts × {args.rounds} rounds (median per rollout)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median * 1e6:9.1f} µs   ×{median / base:8.1f} the in-process answer")
    print(
        f"cost from usage ${cost:.6f} = stand-in tokens × price ${ledger:.6f}: {abs(cost - ledger) < 1e-12}"
    )


if __name__ == "__main__":
    main()
