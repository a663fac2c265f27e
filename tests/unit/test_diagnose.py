"""`capevolve diagnose`: per-task bands, failure clusters, kept_good, the split comparison and the
reflective export (gold redacted) — from persisted rollouts of real sessions; pays nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_capevolve._cli.main import main
from pytest_capevolve._loop.diagnose import signature

# Feedback that gives the gold answer away and names the task's half; an API down for one task.
TATTLER = """

class Tattler(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "q09":
            raise RuntimeError("API down: 503 for request 7f3a9c2e11")
        return super().run_target(task, ctx, seed=seed)

    def score(self, task, rollout):
        scored = super().score(task, rollout)
        if scored.reward == 1.0:
            return scored
        half = "early" if int(task.id[1:]) < 6 else "late"
        feedback = f"{half} slip: expected {task.target}, got {rollout.output} for '{task.input}'"
        return Score(reward=0.0, feedback=feedback)
"""
IDS = [f"q{i:02d}" for i in range(24)]


def make_tattler(example, projects, dest: str = "toy_calc", *, halves: bool = True) -> Path:
    """toy_calc with the Tattler adapter and fixed splits: train q00-q05, val q06-q17, test
    q18-q23; ``halves=False`` makes its feedback the same on both halves."""
    project = example("toy_calc", dest)
    source = TATTLER if halves else TATTLER.replace('"early" if int(task.id[1:]) < 6 else "late"', '"any"')
    projects.add_adapter(project, source, "adapter.py:Tattler")
    (project / "splits.yaml").write_text(
        yaml.safe_dump({"train": IDS[:6], "val": IDS[6:18], "test": IDS[18:]})
    )
    spec = project / "capevolve.yaml"
    text = "\n".join(line for line in spec.read_text().splitlines() if not line.startswith("split_"))
    spec.write_text(text + "\nsplit_ids_file: splits.yaml\n")
    return project


@pytest.fixture
def tattler(example, projects):
    return make_tattler(example, projects)


@pytest.fixture
def diagnose(capsys):
    """``diagnose(project, tag, *args) -> dict``: run `capevolve diagnose` and read its JSON."""

    def run(project: Path, tag: str, *args: str) -> dict:
        capsys.readouterr()
        assert main(["diagnose", tag, str(project), *args]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        return json.loads(out)

    return run


@pytest.mark.parametrize(
    ("feedback", "expected"),
    [
        ("answered 22 to '3 * 7'", "answered <n> to <str>"),
        ('order "ABC-123" not found (code 404)', "order <str> not found (code <n>)"),
        ("user u4711   failed\n twice at 3.5s", "user <id> failed twice at <n>s"),
        ("hash deadbeefcafe mismatch", "hash <id> mismatch"),
        ("the customer's refund wasn't issued", "the customer's refund wasn't issued"),
        ("", "(no feedback)"),
    ],
)
def test_signature_folds_numbers_quotes_ids_and_whitespace(feedback, expected):
    assert signature(feedback) == expected
    assert signature(feedback) == signature(feedback)
