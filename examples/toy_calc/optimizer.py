"""A deterministic rule-fixer: the optimizer of ``capevolve hill-climb examples/toy_calc``.

Run by the loop as ``python optimizer.py {workdir} {prompt}``. It reads the prompt's failure
index (rows ``| task | k/n | feedback | rollout |``) and its focus line, and for each focused
failure adds the rule the agent is missing to the work copy's ``prompt.md``: "Multiply
carefully." for a failed ``*`` question, "Mind the sign." for a failed ``-`` one (see
adapter.py). No network, no model: the same prompt gives the same edit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

RULES = {"*": "Multiply carefully.", "-": "Mind the sign."}
ROW = re.compile(r"^\| (?P<task>[^|]+?) \| \d+/\d+ \| (?P<feedback>[^|]*) \|")
FOCUS = re.compile(r"^Fix these (?:val|train) tasks first: (?P<ids>.+)$", re.MULTILINE)


def main(workdir: Path, prompt: Path) -> int:
    text = prompt.read_text(encoding="utf-8")
    focus_line = FOCUS.search(text)
    focus = {t.strip() for t in focus_line["ids"].split(",")} if focus_line else set()
    capability = workdir / "prompt.md"
    current = capability.read_text(encoding="utf-8")
    added = []
    for line in text.splitlines():
        row = ROW.match(line)
        if row is None or row["task"] == "task" or row["task"] not in focus:
            continue
        question = re.search(r"'(\d+) ([*+-]) (\d+)'", row["feedback"])
        rule = RULES.get(question.group(2)) if question else None
        if rule and rule.lower() not in current.lower() and rule not in added:
            added.append(rule)
    if added:
        capability.write_text(current.rstrip("\n") + "\n" + "\n".join(added) + "\n", encoding="utf-8")
    with (workdir / "JOURNAL.md").open("a", encoding="utf-8") as journal:
        journal.write(f"## Iteration {workdir.name}\nFocus {sorted(focus)}; added: {added or 'nothing'}.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
