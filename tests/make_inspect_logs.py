"""Make real inspect_ai logs, offline, with inspect's mock model: the arithmetic task of
examples/inspect_task (its ``mock_model`` answers bare numbers only to a prompt asking for
"only the final answer", and slips at the same samples for the same seed).

    python tests/make_inspect_logs.py OUT

writes, 12 samples × 2 epochs each:

- ``OUT/seed.eval`` — the seed prompt at seed 0 (chatty answers: ``exact()`` fails them all);
- ``OUT/terse.eval`` — the terse candidate at seed 0 (mostly right);
- ``OUT/terse-again.json`` — the terse candidate again at seed 1, as a ``.json`` log.

Run in a child process by tests/e2e/test_compare_e2e.py (inspect keeps process-wide state);
run by hand to look at the logs with ``inspect view``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "inspect_task"
RUNS = {
    "seed.eval": (EXAMPLE / "capability", 0, "eval"),
    "terse.eval": (EXAMPLE / "candidates" / "terse", 0, "eval"),
    "terse-again.json": (EXAMPLE / "candidates" / "terse", 1, "json"),
}


def main(out: Path) -> None:
    sys.path.insert(0, str(EXAMPLE))
    from adapter import arithmetic, mock_model  # examples/inspect_task/adapter.py
    from inspect_ai import eval as inspect_eval

    out.mkdir(parents=True, exist_ok=True)
    for name, (capability, seed, log_format) in RUNS.items():
        scratch = out / f".{name}"
        [log] = inspect_eval(
            arithmetic(capability),
            model="mockllm/model",
            model_args={"custom_outputs": mock_model},
            epochs=2,
            seed=seed,
            log_dir=str(scratch),
            log_format=log_format,
            display="none",
        )
        assert log.status == "success", (name, log.error)
        shutil.move(log.location, out / name)
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
