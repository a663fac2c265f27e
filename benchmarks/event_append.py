"""What checking each append against the declared kinds (``_store/log/event_kinds.py``) costs.

N rollout events (default 20,000, with the fields a session writes) are appended to a fresh log;
the same N field sets are then put through the declaration's check alone. Best of three each,
printed as the check's share of an append.

    python benchmarks/event_append.py [N]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from pathlib import Path

from pytest_capevolve._store.log.event_kinds import ROLLOUT, check
from pytest_capevolve._store.log.events import EventLog


def main(count: int) -> None:
    fields = [
        dict(split="val", task_id=f"t{i}", tag="seed", trial=0, reward=1.0, infra_error=None)
        | dict(cost_usd=0.001, sha256="x" * 64, claim="1-abc")
        for i in range(count)
    ]
    appends, checks = float("inf"), float("inf")
    for _ in range(3):
        log = EventLog(Path(tempfile.mkdtemp()) / "events.jsonl", contextlib.nullcontext)
        start = time.perf_counter()
        for each in fields:
            log.append_event(ROLLOUT, **each)
        appends = min(appends, time.perf_counter() - start)
        start = time.perf_counter()
        for each in fields:
            check(ROLLOUT, each)
        checks = min(checks, time.perf_counter() - start)
    print(
        f"{count} appends: {appends / count * 1e6:.1f} µs each, the kind check {checks / count * 1e6:.2f} µs"
    )
    print(f"check / append = {checks / appends:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
