"""Cutting the task pool into train / val / test, deterministically from a seed; frozen in
``splits.json`` on the controller, never re-split by workers."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from ..exitcodes import CapevolveError

SPLITS = ("train", "val", "test")
TEST_SPLIT = "test"


class TestSealError(CapevolveError):
    """The test split is sealed: already scored, being scored, or not readable before finalize."""

    __test__ = False  # not a pytest test class, whatever its name says


def cut_splits(task_ids: Iterable[str], seed: int, ratios: tuple[float, float, float]) -> dict[str, Any]:
    """Shuffle the sorted ids with ``seed`` and cut them by ``ratios`` (train, val, test)."""
    ids = sorted(set(task_ids))
    random.Random(seed).shuffle(ids)
    n = len(ids)
    n_train = round(n * ratios[0])
    n_val = round(n * ratios[1])
    if ratios[1] > 0 and n_val == 0 and n > n_train:
        n_val = 1
    n_val = min(n_val, n - n_train)
    return {
        "train": sorted(ids[:n_train]),
        "val": sorted(ids[n_train : n_train + n_val]),
        "test": sorted(ids[n_train + n_val :]),
    }
