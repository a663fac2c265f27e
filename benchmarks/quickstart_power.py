"""How often the README quickstart accepts ``improved``, over fresh runs' secrets.

Run: python benchmarks/quickstart_power.py [runs]   (default 3000)

Each run names every candidate's folder from a secret of its own, and examples/noisy_agent draws
from that name, so the quickstart's verdict (and command 1's exit status) is a draw. This replays
the quickstart's gate without a session: per run, four random folder names (the seed, its two
null controls, ``improved``), the example's own adapter for the rewards (40 val tasks × 5 trials;
its reply tool, which decides no reward for these bytes, is skipped),
the package's ``decide`` for the two nulls and then ``improved`` against their floor. It prints
the share accepted, the rejects by basis, and the nulls' false-accept share. A session does the
same (``tests/e2e/test_docs_commands.py`` runs the quickstart under the suite's fixed secret).
"""

from __future__ import annotations

import math
import secrets
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from pytest_capevolve._decide.gate import decide
from pytest_capevolve._decide.verdict import GateConfig
from pytest_capevolve._project.spec import load_spec
from pytest_capevolve._project.splits import cut_splits

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "noisy_agent"
sys.path.insert(0, str(EXAMPLE))
from adapter import NoisyAgentAdapter  # noqa: E402  (the example's own adapter, not a copy)


def main(runs: int, scratch: Path) -> None:
    spec = load_spec(EXAMPLE)
    adapter = NoisyAgentAdapter()
    adapter._closing = lambda capability, category: None  # the reply tool decides no reward here: skipped
    tasks = {task.id: task for task in adapter.tasks("all")}
    val = cut_splits(tasks, spec.split_seed, (spec.split_train, spec.split_val, spec.split_test))["val"]
    config = GateConfig(mode=spec.gate_mode, alpha=spec.gate_alpha, seed=spec.base_seed)

    def rewards(folder: Path) -> np.ndarray:
        return np.array(
            [
                [
                    adapter.score(
                        tasks[t], adapter.run_target(tasks[t], folder, seed=spec.base_seed + k)
                    ).reward
                    for k in range(spec.num_trials)
                ]
                for t in val
            ]
        )

    def gate(tag: str, capability: Path, best: np.ndarray, floor: list[str] | None = None):
        # a folder of the candidate's bytes under a fresh secret-like name: the adapter reads both
        folder = scratch / secrets.token_hex(8)
        folder.symlink_to(capability)
        return decide(
            rewards(folder), best, tag=tag, against="seed", task_ids=val, config=config, null_deltas=floor
        )

    accepted, null_accepts, bases = 0, 0, Counter()
    for _ in range(runs):
        seed_folder = scratch / secrets.token_hex(8)
        seed_folder.symlink_to(EXAMPLE / spec.capability_path)
        best = rewards(seed_folder)
        nulls = [gate(f"seed-null{j}", EXAMPLE / spec.capability_path, best) for j in (1, 2)]
        null_accepts += sum(n.decision == "accept" for n in nulls)
        verdict = gate("improved", EXAMPLE / "candidates" / "improved", best, [n.delta_exact for n in nulls])
        accepted += verdict.decision == "accept"
        if verdict.decision != "accept":
            bases[str(verdict.basis)] += 1
    se = math.sqrt(accepted * (runs - accepted) / runs) / runs
    print(f"improved accepted in {accepted} of {runs} runs ({accepted / runs:.2%} ± {se:.2%})")
    print(f"not accepted, by basis: {dict(bases) or 'none'}")
    print(
        f"null controls accepted: {null_accepts} of {2 * runs} ({null_accepts / (2 * runs):.2%}; α = {config.alpha})"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000, Path(tmp))
