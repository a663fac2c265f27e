"""A 12-val-task project whose agent solves exactly the tasks its prompt lists (``fix q07``):
every candidate's effect is known task by task, so a round's p-values are exact fractions
(k fixed tasks, none worse: p = 1/2^k). Shared by the tests of "a candidate is its bytes",
the test seal across runs and the resolution the gate has on a small val.

toy_calc's 24 tasks with its splits (``split_seed: 1``): 12 val, 6 test, 6 train. The seed
solves none, so its every val reward is 0.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

FIX_LIST = """

class FixList(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        listed = (Path(ctx) / "prompt.md").read_text().splitlines()
        return Rollout(task_id=task.id, output=task.target if f"fix {task.id}" in listed else None)
"""


def make_fix_list(example, projects, dest: str = "fixes") -> Path:
    """A private copy of toy_calc running the FixList agent (no candidate folders of its own).
    Its candidates name val tasks by design (``fix q07``: the effect is the list), so the leak
    guard, which sees three-character ids, is off for it."""
    project = example("toy_calc", dest)
    shutil.rmtree(project / "candidates")
    projects.add_adapter(project, FIX_LIST, "adapter.py:FixList")
    with (project / "capevolve.yaml").open("a") as spec:
        spec.write("leak_guard_min_length: false\n")
    return project


def split_ids(project: Path, split: str) -> list[str]:
    """The frozen ids of ``split`` in the project's newest run."""
    runs = sorted((project / ".capevolve" / "runs").iterdir())
    return list(json.loads((runs[-1] / "splits.json").read_text())[split])


def fixing(project: Path, name: str, tasks: Sequence[str], folder: str = "candidates") -> Path:
    """A candidate ``<folder>/<name>``: the seed's prompt plus one ``fix`` line per task."""
    target = project / folder / name
    target.mkdir(parents=True, exist_ok=True)
    seed = (project / "capability" / "prompt.md").read_text()
    (target / "prompt.md").write_text(seed + "".join(f"fix {t}\n" for t in tasks))
    return target
