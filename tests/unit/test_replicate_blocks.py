"""Replicate blocks (--capevolve-block) and `capevolve multirep`: error across whole runs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.blocks import BLOCK_STRIDE, check_block
from pytest_capevolve._stats.intervals import replicate_summary
from pytest_capevolve._store.readers.evidence import index_records


def multirep(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    code = main(["multirep", *argv, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


# -- pure: the across-block summary -----------------------------------------------------------------

deltas = st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=12)


@given(deltas)
def test_across_block_se_and_p_are_the_one_sample_t_test(values):
    summary = replicate_summary(values)
    sd = float(np.std(values, ddof=1))
    assert summary.blocks == len(values) and summary.df == len(values) - 1
    assert summary.sd == pytest.approx(sd, abs=1e-12)
    assert summary.se == pytest.approx(sd / math.sqrt(len(values)), abs=1e-12)
    if sd > 1e-9:
        assert summary.p_value == pytest.approx(sps.ttest_1samp(values, 0.0).pvalue, rel=1e-9)
        half = sps.t.ppf(0.975, len(values) - 1) * summary.se
        assert summary.ci == pytest.approx((summary.mean - half, summary.mean + half))
    assert summary.positive + summary.negative <= summary.blocks
    assert summary.agreeing == (
        summary.positive if summary.mean > 0 else summary.negative if summary.mean < 0 else 0
    )


@given(deltas, st.floats(-0.5, 0.5, allow_nan=False))
def test_a_shift_shared_by_every_block_moves_the_mean_not_the_se(values, shift):
    moved, original = replicate_summary([v + shift for v in values]), replicate_summary(values)
    assert moved.mean == pytest.approx(original.mean + shift, abs=1e-9)
    assert moved.se == pytest.approx(original.se, abs=1e-9)


def test_two_blocks_se_is_half_their_difference_and_one_block_has_none():
    two = replicate_summary([0.115, 0.145])
    assert two.se == pytest.approx(0.015) and two.mean == pytest.approx(0.13) and two.agree
    one = replicate_summary([0.1])
    assert one.se is None and one.ci is None and one.agreeing == 1
    disagree = replicate_summary([0.2, -0.25])
    assert disagree.agreeing == 1 and not disagree.agree and not disagree.ci_excludes_zero
    with pytest.raises(ValueError, match="one finite"):
        replicate_summary([])


def test_a_block_is_told_by_its_trial_index_and_decisions_read_block_0(val_rollout):
    records = [val_rollout("a", "t1", k, 1.0) for k in range(3)]
    records += [val_rollout("a", "t1", BLOCK_STRIDE + k, 0.0) for k in range(3)]
    assert [r.block for r in records] == [0, 0, 0, 1, 1, 1]
    block0, block1 = index_records(records), index_records(records, 1)
    assert sorted(block0["a"]) == sorted(block1["a"]) == [("t1", 0), ("t1", 1), ("t1", 2)]
    assert {r.reward for r in block0["a"].values()} == {1.0} and {r.reward for r in block1["a"].values()} == {
        0.0
    }
    assert check_block("3") == 3
    for bad in ("-1", "x", "1001", "1.5"):
        with pytest.raises(ValueError, match="whole number from 0 to 1000"):
            check_block(bad)


# -- end to end ----------------------------------------------------------------------------------------
