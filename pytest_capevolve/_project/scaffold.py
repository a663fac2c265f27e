"""``capevolve init``: the files of a new project that runs offline as it is written.

The adapter is a seeded stand-in agent whose methods say what a real agent's would do; the
project passes ``capevolve check`` and gates its bundled candidate offline
(docs/tutorial/your-project.md). A folder holding any of these files is refused whole."""

from __future__ import annotations

from pathlib import Path

from ..exitcodes import Refusal

SPEC = """\
# capevolve.yaml — what to evaluate and how to judge it (docs: reference/spec.md).
adapter: adapter.py:Adapter        # the class with tasks(), run_target(), score()
capability_path: capability        # the seed: the version of the capability you have today
split_seed: 7                      # the task pool is cut into train / val / test once, frozen
split_train: 0.2
split_val: 0.5                     # the gate reads val only
split_test: 0.3                    # sealed: scored once, by `pytest --capevolve-finalize .`
num_trials: 3                      # trials per task; trial k runs with seed base_seed + k
base_seed: 100
rollout_timeout_s: 60              # a slower rollout is the candidate's failure: a 0, never paid again
gate_mode: exact                   # a calibrated paired test: at most gate_alpha of null candidates accepted
gate_alpha: 0.05
max_metric_calls: 5000             # a ceiling: a session that would pay more is refused before paying
protected_paths: [default]         # a candidate may not edit scorers, gold answers, tests, data
"""

ADAPTER = '''\
"""The adapter: how capevolve talks to your agent (docs: reference/adapter.md).

This one is a stand-in so the project runs offline: a "unit converter" agent whose answers
depend on the rules in the candidate's prompt.md. Replace the three method bodies with calls
to your own agent and scorer; keep their signatures.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from pytest_capevolve import Rollout, Score, Task

# (kind, how often the stand-in gets it right with the seed prompt, the rule that helps it)
KINDS = {
    "add": (0.9, None),
    "km-to-m": (0.35, "RULE:convert-units"),
    "hours-to-minutes": (0.4, "RULE:convert-units"),
}
N_TASKS = 60


class Adapter:
    def tasks(self, split):
        """Every task of the pool (called with "all"): capevolve cuts train/val/test itself.

        A real adapter reads its data set here. Ids must be unique and stable across calls;
        `target` is what the scorer compares against (never shown to a candidate)."""
        tasks = []
        for i in range(N_TASKS):
            kind = list(KINDS)[i % len(KINDS)]
            a, b = 3 + i, 7 + 2 * i
            answer = {"add": a + b, "km-to-m": a * 1000, "hours-to-minutes": a * 60}[kind]
            tasks.append(Task(id=f"t{i:02d}", input={"kind": kind, "a": a, "b": b}, target=str(answer)))
        return tasks

    def run_target(self, task, ctx, *, seed):
        """One rollout: run the agent with the candidate in `ctx` (its folder) on one task.

        A real adapter builds its system prompt from ctx / "prompt.md", calls its model with
        `seed` where the API takes one, and returns the output with its cost. An API outage is
        `Rollout(error="...")`: missing data, never a score of 0."""
        prompt = (Path(ctx) / "prompt.md").read_text(encoding="utf-8")
        kind = task.input["kind"]
        p_right, rule = KINDS[kind]
        if rule and rule in prompt:
            p_right = 0.9
        # the folder's name stands in for an API's nondeterminism: two byte-identical candidates
        # (null controls) still draw differently, as a real model's do (a session runs each
        # candidate from a snapshot folder named from its run's secret: a new run draws anew)
        folder = Path(ctx).name
        draw = random.Random(hashlib.sha256(f"{seed}:{task.id}:{folder}".encode()).hexdigest()).random()
        right = int(task.target)
        wrong = task.input["a"] if kind != "add" else right + 1  # forgot to convert / off by one
        return Rollout(output=str(right if draw < p_right else wrong), cost_usd=0.001, tokens=300)

    def score(self, task, rollout):
        """A reward in [0, 1] and feedback in words (the feedback is what an optimizer reads).

        Deterministic: the same output always gets the same score."""
        if rollout.output == task.target:
            return Score(reward=1.0, feedback="correct")
        kind = task.input["kind"]
        return Score(reward=0.0, feedback=f"answered {rollout.output}, expected {task.target} ({kind})")
'''

SEED_PROMPT = """\
You are a careful assistant. Answer with a number only.
"""

CANDIDATE_PROMPT = """\
You are a careful assistant. Answer with a number only.
- RULE:convert-units — convert the input to the unit asked for before answering.
"""

MICROCASE = """\
# A microcase: a cheap deterministic check of a candidate, run before any rollout is paid for
# (docs: how-to/microcases.md). This one keeps the prompt short and asking for a number. It checks
# the example prompt's wording: with a prompt of your own in capability/, change or delete it
# before your first session (`capevolve check` runs every microcase on the seed).
- id: prompt-asks-for-a-number
  cluster: format
  description: Answers that were not a bare number were scored wrong.
  text: {file: prompt.md, contains: "Answer with a number only", max_bytes: 4000}
"""

OPTIMIZER = '''\
"""A scripted optimizer for `capevolve hill-climb` (replace it with your coding agent's command).

Run as `python optimizer.py {workdir}`: it edits the work copy in place. The first iteration
adds a rule that helps; later ones add a rule that changes nothing (the gate rejects those).
"""

import sys
from pathlib import Path

workdir = Path(sys.argv[1])
prompt = workdir / "prompt.md"
text = prompt.read_text(encoding="utf-8")
if "RULE:convert-units" not in text:
    text += "- RULE:convert-units — convert the input to the unit asked for before answering.\\n"
else:
    text += "- Be concise.\\n"
prompt.write_text(text, encoding="utf-8")
with (workdir / "JOURNAL.md").open("a", encoding="utf-8") as journal:
    journal.write(f"## Iteration {workdir.name}\\nAdded one rule to prompt.md.\\n")
'''

GITIGNORE = ".capevolve/\n__pycache__/\n.pytest_cache/\n"

FILES: dict[str, str] = {
    "capevolve.yaml": SPEC,
    "adapter.py": ADAPTER,
    "capability/prompt.md": SEED_PROMPT,
    "candidates/convert-units/prompt.md": CANDIDATE_PROMPT,
    "microcases/format.yaml": MICROCASE,
    "optimizer.py": OPTIMIZER,
    ".gitignore": GITIGNORE,
}


class ScaffoldError(Refusal):
    """The folder already holds a file ``init`` would write: nothing is written."""


def write_project(dest: Path) -> list[Path]:
    """Write a new project into ``dest`` (created when missing); return the files written."""
    dest = Path(dest)
    taken = [name for name in FILES if (dest / name).exists()]
    if taken:
        raise ScaffoldError(
            f"{dest} already holds {', '.join(taken)}: capevolve init never overwrites a file; "
            "name a new folder (capevolve init ANOTHER), or move those files away first"
        )
    written = []
    for name, text in FILES.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
