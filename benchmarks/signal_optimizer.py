"""The scripted optimizer of benchmarks/hill_climb.py's signal comparison on examples/noisy_agent.

Run by ``capevolve hill-climb`` as ``python signal_optimizer.py {workdir} {prompt}``. Like an
optimizer that reads only the failures it is shown, it guesses the fix from them: it weighs the
failing tasks of the prompt's failure index by category (the example's ticket category is the
task number mod 4), ranks the categories by failing mass (Σ 1 − k/n), and for the
(iteration-th, cycling) worst category adds the rule its failures suggest — one of them a trap
(``baggage-first`` helps baggage and hurts booking just as much). A rule already in the
capability is skipped for the next category. Whatever split the failures come from (val or
train: ``--signal``), the edit is chosen the same way, so the two loops differ only in the
signal.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CATEGORIES = ("booking", "refund", "baggage", "cancel")  # examples/noisy_agent: task n mod 4
GUESS = {
    "booking": "check-fare-class",
    "refund": "read-policy",
    "baggage": "baggage-first",
    "cancel": "verify-identity",
}
ROW = re.compile(r"^\| n(?P<n>\d+) \| (?P<k>\d+)/(?P<of>\d+) \|", re.MULTILINE)


def main(workdir: Path, prompt: Path) -> int:
    iteration = int(workdir.name.rsplit("_", 1)[-1])
    mass = dict.fromkeys(CATEGORIES, 0.0)
    for row in ROW.finditer(prompt.read_text(encoding="utf-8")):
        of = int(row["of"])
        if of:
            mass[CATEGORIES[int(row["n"]) % 4]] += 1 - int(row["k"]) / of
    ranked = sorted(CATEGORIES, key=lambda c: (-mass[c], c))
    capability = workdir / "prompt.md"
    current = capability.read_text(encoding="utf-8")
    start = (iteration - 1) % len(ranked)
    for category in ranked[start:] + ranked[:start]:
        rule = GUESS[category]
        if f"RULE:{rule}" not in current:
            capability.write_text(current.rstrip("\n") + f"\n- RULE:{rule}\n", encoding="utf-8")
            with (workdir / "JOURNAL.md").open("a", encoding="utf-8") as journal:
                journal.write(f"## Iteration {workdir.name}\n{category} fails most: added {rule}.\n")
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
