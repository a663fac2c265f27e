"""What the pass that ties each rollout event to its session's claim costs before a decision.

Run: python benchmarks/paid_by_pass.py

60,000 rollout events (3,000 tasks × 2 tags × 10 trials) and the claim that paid them, as a
gate session's read of the log gives them (``_store/log/paid_by.py``, issue 37): the best of five
passes of :func:`untrusted`, in milliseconds. The log's own read (``of_kinds``) is not in it.
"""

from __future__ import annotations

import time

from pytest_capevolve._store.log import paid_by


def main() -> None:
    keys = [("val", f"t{i:05d}", tag, k) for i in range(3000) for tag in ("seed", "cand") for k in range(10)]
    events: list[dict] = [{"kind": "claimed", "seq": 1, "claim": "c1", "keys": paid_by.claimed_keys(keys)}]
    events += [
        {"kind": "rollout", "seq": 2 + n, "split": s, "task_id": t, "tag": g, "trial": k}
        | {"reward": 1.0, "infra_error": None, "claim": "c1"}
        for n, (s, t, g, k) in enumerate(keys)
    ]
    times = []
    for _ in range(5):
        started = time.perf_counter()
        problems = paid_by.untrusted(events)
        times.append(time.perf_counter() - started)
    print(f"{len(keys)} rollout events: {min(times) * 1000:.1f} ms (best of 5), {len(problems)} problems")


if __name__ == "__main__":
    main()
