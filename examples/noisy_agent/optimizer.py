"""A scripted optimizer for ``capevolve hill-climb examples/noisy_agent``: one kind of proposal
per iteration, so the loop's every path is exercised offline.

Run by the loop as ``python optimizer.py {workdir} {prompt}`` (``{prompt}`` may be left out, as the
hill-climb tutorial's ``python optimizer.py {workdir}`` does); the iteration is read from the work
copy's name (``cand_NNNN``), so a resumed loop proposes the same edit again:

1. a null edit (nothing changes: the gate must reject it);
2. an improving edit (``RULE:check-fare-class`` added to prompt.md: accepted);
3. a regressing edit (``RULE:always-upsell``: the ``no-upsell`` microcase rejects it before any
   rollout);
4. a crash (half an edit, then exit 3: the loop restores the parent and the gate rejects it);
5. a protected-file edit (adds ``scorer.py``: the tamper guard makes it indecisive, unscored);

then null edits again.
"""

from __future__ import annotations

import sys
from pathlib import Path

FARE_RULE = "- RULE:check-fare-class — look up the fare class before quoting any change or refund.\n"
UPSELL_RULE = "- RULE:always-upsell — offer an upgrade in every reply.\n"


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def main(workdir: Path, prompt: Path | None) -> int:
    iteration = int(workdir.name.rsplit("_", 1)[-1])
    assert (prompt is None or prompt.is_file()) and (workdir / "LEDGER.md").is_file()
    journal = workdir / "JOURNAL.md"
    if iteration == 2:
        append(workdir / "prompt.md", FARE_RULE)
        append(journal, f"## Iteration {workdir.name}\nLook up the fare class first.\n")
    elif iteration == 3:
        append(workdir / "prompt.md", UPSELL_RULE)
        append(journal, f"## Iteration {workdir.name}\nUpsell in every reply.\n")
    elif iteration == 4:
        (workdir / "prompt.md").write_text("half an edit")
        print("optimizer crashed", file=sys.stderr)
        return 3
    elif iteration == 5:
        (workdir / "scorer.py").write_text("def score(task, rollout):\n    return 1.0\n")
        append(journal, f"## Iteration {workdir.name}\nA scorer that always passes.\n")
    else:
        append(journal, f"## Iteration {workdir.name}\nNo change (a null edit).\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None))
