"""Issue 24, red-team finding 4: re-rolling chosen rollouts by deleting their files.

With an adapter that does not reproduce its draws (``random.random()``, as an API's own
randomness), the optimizer evaluates, deletes the files of the no-op's failed rollouts and of
the seed's passes (/work/wt/attack/proj6/reroll.py), evaluates again — each vanished file is paid
again, a fresh draw — and repeats, then gates: before the mend, a no-op was accepted. The first
valid outcome the log recorded for each rollout now stands for the decision, and the verdict says
how many rollouts of each arm were paid again."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_calls import gate

UNSEEDED = '''

class UnseededAdapter(NoisyAgentAdapter):
    """A coin flip per rollout. The first draw of a (candidate, task, trial) is fixed by the
    task and trial alone (so the no-op and the seed draw alike); any later draw of it is fresh
    randomness, as an API's is: re-paying a rollout redraws it."""

    def run_target(self, task, ctx, *, seed):
        drawn = Path(__file__).parent / ".draws" / f"{Path(ctx).name}-{task.id}-{seed}"
        if drawn.exists():
            draw = random.SystemRandom().random()
        else:
            drawn.parent.mkdir(exist_ok=True)
            drawn.touch()
            draw = random.Random(f"{task.id}:{seed}").random()
        output = "resolved" if draw < 0.5 else "escalated"
        return Rollout(task_id=task.id, output=output, trace={}, cost_usd=0.001, tokens=10)
'''


def _reroll(run_dir) -> int:
    """proj6/reroll.py: the no-op's failures and the seed's passes deleted."""
    deleted = 0
    for path in (run_dir / "rollouts" / "val").glob("*.json"):
        record = json.loads(path.read_text())
        if (record["tag"] == "noop" and record["reward"] == 0.0) or (
            record["tag"] == "seed" and record["reward"] == 1.0
        ):
            path.unlink()
            deleted += 1
    return deleted


@pytest.mark.attack(
    "record",
    attack=(
        "with a non-reproducible adapter, the no-op's failed rollout files and the seed's passes "
        "deleted before each re-run, then a gate (re-rolled into an accept)"
    ),
    outcome=(
        "prevented: the gate decides on the first valid outcome the log recorded for each rollout; the "
        "verdict records how many of each arm were paid again"
    ),
)
def test_deleting_chosen_rollout_files_to_redraw_them_changes_no_decision(
    example, projects, capevolve, capsys
):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    projects.add_adapter(project, UNSEEDED, "adapter.py:UnseededAdapter")
    projects.writable(project, ".draws")  # where the adapter keeps its draws, as a user is told to
    shutil.rmtree(project / "microcases")  # they expect the noisy agent's own draws
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    with (noop / "prompt.md").open("a") as handle:
        handle.write("\n")
    assert capevolve(project, "noop").ret == 0
    run_dir = projects.run_dir(project)
    deleted = 0
    for _ in range(4):
        deleted += _reroll(run_dir)
        assert capevolve(project, "noop").ret == 0  # the vanished files are paid again
    deleted += _reroll(run_dir)
    files = {
        (r["tag"], r["task_id"], r["trial"]): r["reward"] for r in projects.rollout_records(project).values()
    }
    on_disk = sum(v for (tag, *_), v in files.items() if tag == "noop") - sum(
        v for (tag, *_), v in files.items() if tag == "seed"
    )
    assert on_disk > 10, "the re-rolls did not move the files' numbers"  # what the attack relied on
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    verdict = json.loads((run_dir / "verdicts" / "noop.json").read_text())
    assert verdict["decision"] == "reject", result.stdout.str()[-3000:]
    assert verdict["delta_mean"] == 0  # the first draws: the no-op is the seed
    repaid = verdict["details"]["repaid_rollouts"]
    assert repaid["noop"] > 0 and repaid["seed"] > 0
    assert repaid["noop"] + repaid["seed"] == deleted
    # `capevolve gate` re-derives it through the session's passes: the same first draws, the same
    # repaid counts (it read the redrawn files, and said Δ̄ ≠ 0, before they shared one list)
    again = gate(capsys, project, "noop")
    assert (again["decision"], again["delta_mean"]) == (verdict["decision"], verdict["delta_mean"])
    assert again["details"]["repaid_rollouts"] == repaid


FRESH = '''

class FreshAdapter(NoisyAgentAdapter):
    """A coin flip per rollout, every draw fresh (an API's randomness that ignores the seed)."""

    def run_target(self, task, ctx, *, seed):
        output = "resolved" if random.SystemRandom().random() < 0.5 else "escalated"
        return Rollout(task_id=task.id, output=output, trace={}, cost_usd=0.001, tokens=10)
'''


@pytest.mark.attack(
    "record",
    attack=(
        "with a non-reproducible adapter, a no-op evaluated on val without a gate, then again and again "
        "with `--capevolve-rerun` (fresh tags `noop-r2`, `noop-r3`: fresh draws of the same bytes), and "
        "the tag whose val draws came out best gated (`--capevolve-tag noop-r2 --capevolve-gate`), or "
        "`--capevolve-rerun --capevolve-gate` after a look at the first draws: the gate read that tag's "
        "draws, so the luckiest of N redraws was gated (Δ̄ +0.15 over the seed's from a no-op, 4 draws)"
    ),
    outcome=(
        "refused in one line before anything is registered or paid (exit 4): a gate reads the bytes' "
        "first draws in the run, naming the tag that holds them and the way on (gate that tag, without "
        "`--capevolve-rerun`)"
    ),
)
def test_the_luckiest_rerun_of_the_same_bytes_is_never_gated(example, projects, capevolve) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.add_adapter(project, FRESH, "adapter.py:FreshAdapter")
    shutil.rmtree(project / "microcases")  # they expect the noisy agent's own draws
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    (noop / "notes.md").write_text("a no-op\n")
    assert capevolve(project, "noop").ret == 0
    assert capevolve(project, "noop", extra=["--capevolve-rerun"]).ret == 0  # noop-r2: a fresh measurement
    paid = len(projects.rollout_records(project))
    for tags, extra in ((["noop-r2"], []), ([], ["--capevolve-rerun"])):
        result = capevolve(
            project, "noop", tags=tags, gate=True, extra=["--capevolve-commit", "none", *extra]
        )
        assert result.ret == 4, result.stdout.str()[-2000:]  # before: noop-r2 (or noop-r3) gated on its draws
        lines = [line for line in result.stderr.str().splitlines() if "first drawn as 'noop'" in line]
        assert len(lines) == 1 and "gate 'noop' (--capevolve-tag noop, without --capevolve-rerun)" in lines[0]
    run_dir = projects.run_dir(project)
    assert len(projects.rollout_records(project)) == paid and not list(run_dir.glob("verdicts/noop-r*"))
    # the way on: the bytes gated on their first draws
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret in (0, 10), result.stdout.str()[-2000:]
    assert json.loads((run_dir / "verdicts" / "noop.json").read_text())["decision"] in ("accept", "reject")


# a run secret under which noisy_agent's third of four no-op looks draws well (found by trying secrets
# offline): over fresh secrets the luckiest of 10 looks clears the loop's first level 10 % of the time
LOOKS_SECRET = bytes.fromhex("48c3b58032f991d105f90b74a9821315ee41809fb9431d1a24ff8bc1d3746f79")


@pytest.mark.attack(
    "loop-memory",
    attack=(
        "no-op variants of the best (a comment each, `capevolve work new` ×N) evaluated on val without a "
        "gate (`capevolve pytest --capevolve-run . --capevolve-candidate WORK`, a command the broker "
        "passes), their means read off the table, and the luckiest gated: the gate reads the draws the "
        "optimizer chose it by, at the level of the run's first decision (`addis`, 1/64). On noisy_agent "
        "(40 val tasks × 5 trials) over 400 fresh secrets: the luckiest of 10 looks accepted in 10 %, of "
        "20 in 11 %, one gated blind in 1 %; here the third of four looks, accepted at p = 0.0125"
    ),
    outcome=(
        "**not held**: a gate reads the first draws of its bytes (a redraw of the same bytes is refused, "
        "above), but a look at other bytes spends no α: the schedule counts decisions only. Screens show "
        "as much of val (tier 3: 75 %) before a gate. A design question for the lead: a look that spends "
        "a slot of the schedule, or a gate that draws afresh what the optimizer saw"
    ),
    note="xfail, strict",
)
@pytest.mark.xfail(strict=True, reason="a val look at other bytes spends no α: the luckiest look is gated")
def test_the_luckiest_of_several_val_looks_is_not_accepted(example, projects, capevolve, monkeypatch):
    from pytest_capevolve._cli.main import main
    from pytest_capevolve._store.sessions import order_secret

    monkeypatch.setattr(order_secret, "new_secret", lambda: LOOKS_SECRET)
    project = example("noisy_agent")
    assert capevolve(project).ret == 0
    work = projects.run_dir(project) / "work"
    means = {}
    for i in range(1, 5):
        assert main(["work", "new", f"w{i}", str(project)]) == 0
        with (work / f"w{i}" / "prompt.md").open("a") as handle:
            handle.write(f"\n<!-- look {i} -->\n")
        looked = capevolve(project, work / f"w{i}")
        line = next(x for x in looked.outlines if x.startswith(f"w{i} "))
        means[f"w{i}"] = float(line.split()[4])
    luckiest = max(means, key=lambda tag: means[tag])
    capevolve(project, work / luckiest, gate=True)
    verdict = json.loads((projects.run_dir(project) / "verdicts" / f"{luckiest}.json").read_text())
    assert verdict["decision"] != "accept", (means, verdict["reason"])
