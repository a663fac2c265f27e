"""A stochastic stand-in for an LLM agent, offline and seeded.

Each task has a hidden difficulty (some always pass, some never, most in between) and a
category. The capability's markdown files carry rules (``RULE:<name>``); each rule shifts the
log-odds of success per category. A rollout draws its outcome from a generator seeded by the
trial seed, the task and the name of the folder it runs from, so two folders with the same bytes
(null controls) draw differently, as a real agent's runs do. A session runs each candidate from a
folder named from its run's secret: a new run draws anew, as a real model would. The
agent closes each ticket with the candidate's ``tools/reply.py``; if that tool breaks, the
ticket is escalated.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import random
import re
from pathlib import Path

from pytest_capevolve import Rollout, Score, Task

CATEGORIES = ("booking", "refund", "baggage", "cancel")
N_TASKS = 80
# log-odds shift per rule and category
RULE_EFFECTS = {
    "verify-identity": dict.fromkeys(CATEGORIES, 0.8),
    "read-policy": dict.fromkeys(CATEGORIES, 0.5),
    "check-fare-class": {"booking": 3.2, "refund": 3.2, "cancel": 3.2, "baggage": 0.6},
    "always-upsell": dict.fromkeys(CATEGORIES, -1.6),
    "baggage-first": {"baggage": 2.5, "booking": -2.5, "refund": 0.0, "cancel": 0.0},
    # in the policy skill, not the prompt: helps baggage most, where check-fare-class helps least
    "cite-policy": {"baggage": 4.0, "booking": 1.5, "refund": 1.5, "cancel": 1.5},
}
RULE_RE = re.compile(r"RULE:([a-z-]+)")


def _difficulty(index: int) -> float:
    """Base log-odds, spread like a real agent's: easy, impossible, and many in between."""
    rng = random.Random(1000 + index)
    kind = rng.random()
    if kind < 0.2:
        return 6.0  # always passes
    if kind < 0.35:
        return -7.0  # never passes
    return rng.uniform(-2.5, 1.5)


class ReplyToolBroken(Exception):
    pass


class NoisyAgentAdapter:
    def tasks(self, split: str) -> list[Task]:
        return [
            Task(
                id=f"n{i:02d}",
                input={"category": CATEGORIES[i % len(CATEGORIES)], "ticket": f"ticket #{i}"},
                target="resolved",
                metadata={"difficulty": _difficulty(i)},
            )
            for i in range(N_TASKS)
        ]

    def _rules(self, capability: Path) -> list[str]:
        text = "\n".join(p.read_text() for p in sorted(Path(capability).rglob("*.md")))
        return sorted(set(RULE_RE.findall(text)))

    def _closing(self, capability: Path, category: str) -> str | None:
        """Close the ticket with the candidate's own reply tool; a broken tool fails the task."""
        path = Path(capability) / "tools" / "reply.py"
        if not path.is_file():
            return None
        spec = importlib.util.spec_from_file_location("noisy_agent_reply", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            return str(module.closing_line(category))
        except Exception as exc:
            raise ReplyToolBroken(f"{type(exc).__name__}: {exc}") from exc

    def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:
        rules = self._rules(ctx)
        category = task.input["category"]
        logit = task.metadata["difficulty"] + sum(
            RULE_EFFECTS.get(rule, {}).get(category, 0.0) for rule in rules
        )
        p_success = 1.0 / (1.0 + math.exp(-logit))
        # The folder's name stands in for an API's nondeterminism: two folders with equal bytes
        # still draw differently. It names no tag and no one can pick it (the run's secret does).
        key = f"{seed}:{task.id}:{Path(ctx).name}".encode()
        draw = random.Random(hashlib.sha256(key).hexdigest()).random()
        output = "resolved" if draw < p_success else "escalated"
        try:
            reply = self._closing(ctx, category)
        except ReplyToolBroken as exc:
            output, reply = "escalated", f"reply tool broken: {exc}"
        return Rollout(
            task_id=task.id,
            output=output,
            trace={"rules": rules, "p_success": round(p_success, 4), "reply": reply},
            cost_usd=0.0021,
            tokens=1400,
        )

    def score(self, task: Task, rollout: Rollout) -> Score:
        ok = rollout.output == task.target
        feedback = "ticket resolved" if ok else f"ticket {rollout.output}: customer not helped"
        return Score(reward=1.0 if ok else 0.0, feedback=feedback)
