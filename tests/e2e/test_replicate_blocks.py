"""Replicate blocks (--capevolve-block) and `capevolve multirep`: error across whole runs."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import pytest
from scipy import stats as sps

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.blocks import BLOCK_STRIDE


def multirep(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    code = main(["multirep", *argv, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def rollout_bytes(project: Path) -> dict[str, bytes]:
    runs = sorted((project / ".capevolve" / "runs").iterdir())[-1]
    return {p.name: p.read_bytes() for p in sorted((runs / "rollouts" / "val").glob("*.json"))}


# -- pure: the across-block summary -----------------------------------------------------------------


# -- end to end ----------------------------------------------------------------------------------------


def test_two_blocks_of_one_candidate_give_the_across_run_se(
    improved_gated, projects, capevolve, capsys, pytester
):
    project, gated = improved_gated  # at two trials: blocks work alike at any n
    assert gated.ret == 0, gated.stdout.str()
    verdict_path = next((project / ".capevolve" / "runs").iterdir()) / "verdicts" / "improved.json"
    verdict = json.loads(verdict_path.read_text())
    block0 = rollout_bytes(project)
    capsys.readouterr()
    assert main(["gate", "improved", "--project", str(project), "--json"]) == 0
    before = capsys.readouterr().out.splitlines()[-1]
    assert json.loads(before)["n_tasks"] == 40 and json.loads(before)["trials"] == 2

    code, single, _ = multirep(capsys, "improved", str(project), "--against", "seed")
    assert code == 0 and single["status"] == "single_block" and single["across"]["se"] is None

    # the gate never reads a replicate block, so a gate session in one is refused
    refused = capevolve(project, "improved", gate=True, extra=["--capevolve-block", "1"])
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*--capevolve-gate with --capevolve-block 1: the gate reads block 0 only*"])

    # the session multirep names, pasted: the seed (its capability folder) beside the candidate
    # (the best is now `improved`), each under its tag, in block 1
    pasted = re.fullmatch(
        r"one block: no across-run SE yet; evaluate another \((pytest .*)\) to see .*", single["reason"]
    )
    assert pasted is not None, single["reason"]
    words = shlex.split(pasted.group(1))
    folders = [Path(words[i + 1]).resolve() for i, w in enumerate(words) if w == "--capevolve-candidate"]
    assert Path(words[words.index("--capevolve-run") + 1]).resolve() == project.resolve()
    assert folders == [(project / "capability").resolve(), (project / "candidates" / "improved").resolve()]
    assert [words[i + 1] for i, w in enumerate(words) if w == "--capevolve-tag"] == ["seed", "improved"]
    second = pytester.runpytest(*words[1:], "-p", "no:cacheprovider", "-v")
    assert second.ret == 0, second.stdout.str()
    second.stdout.fnmatch_lines(
        ["*n??[[]improved-b1-t1[]]*", "*replicate block 1 (trial seeds base_seed + 1000000 + k)*"]
    )
    # the multirep the block names, pasted: the best against the seed (it said `capevolve multirep TAG`,
    # and `capevolve multirep improved`, the best, was refused as compared with itself, with no tag named)
    named = shlex.split(second.stdout.str().split("compare the blocks with `", 1)[1].split("`")[0])
    assert named[:3] == ["capevolve", "multirep", "improved"] and named[-2:] == ["--against", "seed"], named
    code, pasted_answer, _ = multirep(capsys, *named[2:])
    assert code == 0 and pasted_answer["status"] != "single_block", pasted_answer
    capsys.readouterr()
    assert main(["multirep", "improved", str(project)]) == 2
    way = shlex.split(capsys.readouterr().err.split("compare it with another: `", 1)[1].split("`")[0])
    assert way[:3] == ["capevolve", "multirep", "improved"] and way[-2:] == ["--against", "seed"], way
    after = rollout_bytes(project)
    assert {k: after[k] for k in block0} == block0  # block 0's files: same names, same bytes
    new = {k: json.loads(v) for k, v in after.items() if k not in block0}
    assert len(new) == 2 * 40 * 2
    assert {r["trial"] for r in new.values()} == {BLOCK_STRIDE + k for k in range(2)}
    assert all(r["seed"] == 100 + r["trial"] for r in new.values())  # base_seed + B·stride + k
    capsys.readouterr()
    assert main(["gate", "improved", "--project", str(project), "--json"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == before  # the gate's numbers (n, trials, Δ̄) stay

    code, answer, _ = multirep(capsys, "improved", str(project), "--against", "seed")
    assert code == 0 and answer["against"] == "seed"
    rows = {row["block"]: row for row in answer["blocks"]}
    assert set(rows) == {0, 1} and all(row["used"] for row in rows.values())
    assert rows[0]["delta_mean"] == pytest.approx(verdict["delta_mean"], abs=1e-12)
    assert rows[0]["paired_se"] == pytest.approx(verdict["se"], abs=1e-12)
    d0, d1 = rows[0]["delta_mean"], rows[1]["delta_mean"]
    assert d1 != d0  # fresh seeds: an independent run of the same comparison
    across = answer["across"]
    assert across["blocks"] == 2 and across["df"] == 1
    assert across["mean"] == pytest.approx((d0 + d1) / 2)
    assert across["se"] == pytest.approx(abs(d0 - d1) / 2)
    half = sps.t.ppf(0.975, 1) * across["se"]
    assert across["ci"] == pytest.approx([across["mean"] - half, across["mean"] + half])
    assert across["agree"] is (d0 > 0 and d1 > 0 or d0 < 0 and d1 < 0)


DRIFT_ADAPTER = '''
import hashlib

from pytest_capevolve import Rollout, Score, Task

STRIDE = 1_000_000


def unit(text):
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class DriftAdapter:
    """Rewards that barely vary across tasks, plus — for the candidate only — a shift shared by
    every task of a run: +0.15 in even blocks, -0.15 in odd ones (a provider's load, say)."""

    def tasks(self, split):
        return [Task(id=f"d{i:02d}", input=i, target=None) for i in range(24)]

    def run_target(self, task, ctx, *, seed):
        prompt = (ctx / "prompt.md").read_text()
        reward = 0.5 + 0.1 * (unit(f"{task.id}:{ctx.name}") - 0.5)
        if prompt == "drifty\\n":
            reward += 0.15 if (seed // STRIDE) % 2 == 0 else -0.15
        return Rollout(output=round(reward, 6))

    def score(self, task, rollout):
        return Score(reward=rollout.output)
'''


def test_run_to_run_drift_the_paired_se_misses_the_blocks_show(pytester, capevolve, capsys, xdist_args):
    project = pytester.path / "drift"
    (project / "capability").mkdir(parents=True)
    (project / "capability" / "prompt.md").write_text("seed\n")
    (project / "candidates" / "drifty").mkdir(parents=True)
    (project / "candidates" / "drifty" / "prompt.md").write_text("drifty\n")
    (project / "adapter.py").write_text(DRIFT_ADAPTER)
    (project / "capevolve.yaml").write_text(
        "adapter: adapter.py:DriftAdapter\ncapability_path: capability\nnum_trials: 2\n"
        "split_train: 0.0\nsplit_val: 1.0\nsplit_test: 0.0\n"
    )
    drifty = project / "candidates" / "drifty"
    assert capevolve(project, drifty).ret == 0
    second = capevolve(project, drifty, extra=["--capevolve-block", "1", *xdist_args])  # -n 2 too
    assert second.ret == 0, second.stdout.str()
    code, answer, _ = multirep(capsys, "drifty", str(project))
    assert code == 0
    rows = [row for row in answer["blocks"] if row["used"]]
    assert [row["block"] for row in rows] == [0, 1]
    for row in rows:  # inside one run the paired SE calls the shift a clear effect ...
        assert abs(row["delta_mean"]) > 5 * row["paired_se"]
    assert rows[0]["delta_mean"] > 0 > rows[1]["delta_mean"]
    across = answer["across"]  # ... across runs it is run-to-run error
    assert across["se"] > 5 * across["paired_se"] and across["drift_ratio"] > 5
    assert across["sd"] == pytest.approx(abs(rows[0]["delta_mean"] - rows[1]["delta_mean"]) / math.sqrt(2))
    assert across["agreeing"] == 1 and across["agree"] is False
    assert answer["status"] == "not_resolvable"
    assert answer["reason"].startswith("not resolvable at this budget: only 1 of 2 blocks agree in sign")
    capsys.readouterr()
    assert main(["multirep", "drifty", str(project)]) == 0
    table = capsys.readouterr().out
    assert "not_resolvable: not resolvable at this budget" in table
    assert "run-to-run error the paired SE cannot see" in table


def test_block_flag_refusals(example, capevolve, capsys):
    project = example("toy_calc")
    for flags, message in (
        (
            ["--capevolve-block", "-1"],
            "*--capevolve-block: a replicate block is a whole number from 0 to 1000*",
        ),
        (["--capevolve-block", "x"], "*--capevolve-block: a replicate block is a whole number*"),
    ):
        result = capevolve(project, extra=flags)
        assert result.ret == 4
        result.stderr.fnmatch_lines([message])
    grow = capevolve(project, "careful", extra=["--capevolve-grow", "--capevolve-block", "1"])
    assert grow.ret == 4
    grow.stderr.fnmatch_lines(["*--capevolve-block does not apply to --capevolve-grow*"])
    finalize = capevolve(project, finalize=True, extra=["--capevolve-block", "1"])
    assert finalize.ret == 4
    finalize.stderr.fnmatch_lines(["*--capevolve-block does not apply to --capevolve-finalize*"])
    capsys.readouterr()
    assert main(["multirep", "careful", str(project)]) == 4  # no run: a usage error, as in every command
    assert "no run under" in capsys.readouterr().err
