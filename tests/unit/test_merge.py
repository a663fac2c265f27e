"""`capevolve merge`: siblings that fixed different things, merged onto their common parent
through git's 3-way merge, then gated like any candidate (or addition by addition)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._cli.main import main
from pytest_capevolve._loop.merge import three_way


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()  # drop what an in-process session printed before
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out.splitlines()[-1]) if out.strip() else None), err


# -- the 3-way merge, file by file ---------------------------------------------------------------------


trees = st.dictionaries(st.sampled_from(["a", "b", "c", "d/e", "d/f"]), st.binary(max_size=6), max_size=5)


def never_merged(base: bytes, current: bytes, other: bytes) -> bytes | None:
    raise AssertionError("no file was changed on both sides")


@given(trees, trees, trees)
def test_changes_to_disjoint_files_merge_in_either_order(base, one, two):
    # each side's changes confined to its own files: `one` may touch a, b, c; `two` only d/*
    mine = {k: v for k, v in one.items() if not k.startswith("d/")} | {
        k: v for k, v in base.items() if k.startswith("d/")
    }
    theirs = {k: v for k, v in two.items() if k.startswith("d/")} | {
        k: v for k, v in base.items() if not k.startswith("d/")
    }
    forward, conflicts = three_way(base, mine, theirs, never_merged)
    backward, conflicts_back = three_way(base, theirs, mine, never_merged)
    assert conflicts == conflicts_back == [] and forward == backward
    assert {k: v for k, v in forward.items() if not k.startswith("d/")} == {
        k: v for k, v in mine.items() if not k.startswith("d/")
    }
    assert three_way(base, mine, base, never_merged) == (mine, [])  # nothing to add
    assert three_way(base, base, theirs, never_merged) == (theirs, [])  # all of it to add


# -- end to end on examples/noisy_agent ------------------------------------------------------------------
