"""Content keys of tasks (:mod:`pytest_capevolve._store.memory.task_keys`): a digest of the task, not
its id, stable across processes, and no key where it would not tell tasks apart."""

from __future__ import annotations

from pytest_capevolve import Task
from pytest_capevolve._store.memory.task_keys import KEY_LENGTH, Tasks, content_key, of_pool


class Opaque:
    """An input JSON cannot hold, whose default repr names a memory address."""


def test_a_key_is_the_tasks_content_not_its_id_and_a_huge_input_is_kept_as_a_digest() -> None:
    huge = "x" * 5_000_000
    assert content_key(Task("t07", huge, 3)) == content_key(Task("T07", huge, 3))
    assert content_key(Task("t07", huge, 3)) != content_key(Task("t07", huge, 4))
    assert content_key(Task("a", {"k": 1}, None, {"m": 1})) != content_key(Task("a", {"k": 1}))
    assert len(content_key(Task("t07", huge, 3))) == KEY_LENGTH
    # an address in a repr is not content: two equal objects give one key
    assert content_key(Task("a", Opaque())) == content_key(Task("b", Opaque()))


def test_content_that_does_not_tell_tasks_apart_is_no_key() -> None:
    pool = {"a": Task("a"), "b": Task("b"), "c": Task("c", "2 + 2", 4)}
    assert set(of_pool(pool)) == {"c"}  # two empty tasks: matched by id alone


def test_an_overlap_is_by_id_or_by_content_and_a_foreign_set_counts_by_content_only() -> None:
    keys = {"T01": "k1", "T02": "k2", "T03": "k3"}
    mine = Tasks.of(["T01", "T02", "T03"], keys)
    assert mine.shared(Tasks(frozenset({"t01"}), frozenset({"k1", "k2"})), keys) == ["T01", "T02"]
    assert mine.shared(Tasks(frozenset({"T03"})), keys) == ["T03"]
    foreign = Tasks.from_row({"test_ids": ["T01"], "test_keys": ["zz"]}, "test", foreign=True)
    assert mine.shared(foreign, keys) == []
    assert mine.same_as(Tasks(frozenset(), frozenset({"k1", "k2", "k3"})), keys)
    assert not mine.same_as(Tasks(frozenset(), frozenset({"k1", "k2", "k3", "k4"})), keys)
