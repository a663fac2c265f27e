"""Cutting the task pool into train / val / test, deterministically from a seed.

Computed once per run on the controller and frozen in ``splits.json``; workers receive the
frozen ids and never re-split.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path

import yaml

from .paths import to_stored
from .spec import SPLITS, Spec, SpecError

TEST_SPLIT = "test"


class TestSealError(Exception):
    """The test split is sealed: already scored, being scored, or not readable before finalize."""

    __test__ = False  # not a pytest test class, whatever its name says


def cut_splits(task_ids: Iterable[str], seed: int, ratios: tuple[float, float, float]) -> dict:
    """Shuffle the sorted ids with ``seed`` and cut them by ``ratios`` (train, val, test).

    Sorting first makes the result independent of the order the adapter lists its tasks in.
    """
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


def splits_for(spec: Spec, pool_ids: Iterable[str]) -> dict:
    """The splits the spec asks for: from ``split_ids_file`` or cut from the pool."""
    pool = set(pool_ids)
    if spec.split_ids_file is None:
        ratios = (spec.split_train, spec.split_val, spec.split_test)
        result = cut_splits(pool, spec.split_seed, ratios)
        source = {"split_seed": spec.split_seed, "ratios": list(ratios)}
    else:
        path = spec.split_ids_file
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise SpecError(f"{path}: split_ids_file is not valid JSON/YAML: {exc}") from exc
        if not isinstance(raw, dict) or not set(raw) <= set(SPLITS):
            raise SpecError(f"{path}: split_ids_file must map train/val/test to lists of task ids")
        result = {}
        for split in SPLITS:
            ids = [str(i) for i in (raw.get(split) or [])]
            unknown = sorted(set(ids) - pool)
            if unknown:
                raise SpecError(
                    f"{path}: split {split!r} names task ids the adapter does not have: "
                    f"{', '.join(map(repr, unknown[:5]))}"
                )
            if len(set(ids)) != len(ids):
                raise SpecError(f"{path}: split {split!r} lists a task id twice")
            result[split] = sorted(ids)
        source = {"split_ids_file": to_stored(Path(path), spec.project_dir)}
    if not result["val"]:
        raise SpecError(f"{spec.path}: the val split is empty; the gate would have no data")
    return {**result, "source": source}
