"""The harness fingerprint on its own: which files count, and what a change looks like."""

from __future__ import annotations

from pathlib import Path

from pytest_capevolve import Task
from pytest_capevolve._project import harness


def _project(tmp_path: Path) -> Path:
    (tmp_path / "capability").mkdir()
    (tmp_path / "capability" / "prompt.md").write_text("be kind\n")
    (tmp_path / "capability" / "conftest.py").write_text("# inside the capability: the tamper guard's\n")
    (tmp_path / "scoring").mkdir()
    (tmp_path / "scoring" / "__init__.py").write_text("")
    (tmp_path / "scoring" / "judge.py").write_text("from .rules import RULE\n")
    (tmp_path / "scoring" / "rules.py").write_text("RULE = 1\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "adapter.py").write_text("import json\nimport helpers\nfrom scoring import judge\n")
    (tmp_path / "tasks.json").write_text('[{"id": "a"}]\n')
    (tmp_path / "README.md").write_text("notes\n")
    (tmp_path / "capevolve.yaml").write_text("adapter: adapter.py:A\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text("# planted\n")
    (tmp_path / ".capevolve" / "runs" / "r" / "work" / "t").mkdir(parents=True)
    (tmp_path / ".capevolve" / "runs" / "r" / "work" / "t" / "conftest.py").write_text("")
    return tmp_path


def _fingerprint(root: Path) -> dict[str, str]:
    return harness.fingerprint(root, "adapter.py:A", exclude=[root / "capability"])


def test_the_fingerprint_holds_the_adapter_what_it_imports_and_every_conftest(tmp_path):
    root = _project(tmp_path)
    assert sorted(_fingerprint(root)) == [
        "adapter.py",
        "helpers.py",
        "scoring/__init__.py",
        "scoring/judge.py",
        "scoring/rules.py",
        "tests/conftest.py",
    ]


def test_editing_a_scorer_imported_two_levels_down_is_a_change(tmp_path):
    root = _project(tmp_path)
    locked = _fingerprint(root)
    (root / "scoring" / "rules.py").write_text("RULE = 2  # score everything 1\n")
    (root / "conftest.py").write_text("def pytest_runtest_logreport(report): ...\n")
    assert harness.changes(locked, _fingerprint(root)) == [
        "conftest.py (added)",
        "scoring/rules.py (changed)",
    ]


def test_what_is_not_harness_moves_nothing(tmp_path):
    root = _project(tmp_path)
    locked = _fingerprint(root)
    (root / "capability" / "prompt.md").write_text("be kinder\n")  # a candidate edit
    (root / "README.md").write_text("more notes\n")
    (root / "calls.txt").write_text("n01 seed 0\n")  # what an adapter logs beside itself
    (root / "optimizer.py").write_text("# a script nothing imports\n")
    (root / "capevolve.yaml").write_text("adapter: adapter.py:A\nmax_usd: 3\n")  # spec.lock's job
    (root / "candidates" / "c1").mkdir(parents=True)
    (root / "candidates" / "c1" / "prompt.md").write_text("new\n")
    assert harness.changes(locked, _fingerprint(root)) == []


def test_the_tasks_digest_sees_a_changed_gold_answer_and_nothing_else():
    pool = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="6")]
    same = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="6")]
    edited = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="7")]
    assert harness.tasks_digest(pool) == harness.tasks_digest(same)
    assert harness.tasks_digest(pool) != harness.tasks_digest(edited)


def test_the_refusal_is_one_line_naming_the_files_and_the_way_on():
    line = harness.refusal("r1", [f"f{i}.py (changed)" for i in range(6)])
    assert "\n" not in line
    assert (
        "run r1" in line and "f0.py (changed)" in line and "2 more" in line and "--capevolve-new-run" in line
    )
