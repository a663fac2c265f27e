"""The tamper guard: a candidate that changes what scores it is indecisive and costs nothing."""

from __future__ import annotations

import pytest

from pytest_capevolve._project.harness import (
    DEFAULT_PROTECTED,
    expand,
    is_protected,
    protected_digests,
    tampered,
)


def test_tampered_lists_changed_added_and_removed_protected_files(tmp_path):
    seed, cand = tmp_path / "seed", tmp_path / "cand"
    for root in (seed, cand):
        (root / "tasks").mkdir(parents=True)
        (root / "prompt.md").write_text("be kind")
        (root / "tasks" / "t1.json").write_text("{}")
        (root / "gold.json").write_text("{}")
    patterns = expand(["default"], "adapter.py:A")
    assert tampered(protected_digests(seed, patterns), cand, patterns) == []
    (cand / "prompt.md").write_text("be kinder")  # not protected: free to change
    assert tampered(protected_digests(seed, patterns), cand, patterns) == []
    (cand / "tasks" / "t2.json").write_text("{}")
    (cand / "gold.json").unlink()
    (cand / "adapter.py").write_text("class A: ...")
    assert tampered(protected_digests(seed, patterns), cand, patterns) == [
        "adapter.py (added)",
        "gold.json (removed)",
        "tasks/t2.json (added)",
    ]
    assert (
        tampered(protected_digests(seed, ()), cand, ()) == []
    )  # nothing protected, no symlink: nothing to refuse


@pytest.mark.parametrize(
    "path, protected",
    [
        ("scorer.py", True),
        ("tools/scorer_v2.py", True),
        ("tests/test_tool.py", True),
        ("skills/tests/notes.md", False),  # tests/** is anchored at the candidate folder
        ("deep/conftest.py", True),
        ("data/a/b.json", True),
        ("gold_answers.json", True),
        ("skills/golden-rules.md", False),
        ("prompt.md", False),
        ("adapter.py", True),
        ("splits.json", True),
    ],
)
def test_default_protected_paths(path, protected):
    patterns = expand(["default"], "adapter.py:Adapter")
    assert set(DEFAULT_PROTECTED) < set(patterns)
    assert is_protected(path, patterns) is protected


def test_user_globs_anchor_with_a_slash_and_match_names_without():
    assert is_protected("a/b/secret.txt", ["secret.txt"])
    assert not is_protected("a/secret.txt", ["b/secret.txt"])
    assert is_protected("b/x/y/z.txt", ["b/**"]) and is_protected("b/x.txt", ["b/"])
    assert is_protected("x/b/q/z.txt", ["**/q/*.txt"]) and not is_protected("x/b/q/r/z.txt", ["**/q/*.txt"])
