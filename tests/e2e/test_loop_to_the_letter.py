"""Issue 26's "looks implemented, isn't", end to end on examples/toy_calc: a reject basis the
record does not support is refused; hill-climb's store flags, its back-compat focus name and
the new run it advises; `work new` in a finalized run; measure's train row and its reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_calls import hill_climb, run
from run_log import rollout_files

PY = sys.executable
OPTIMIZER = f"{PY} optimizer.py {{workdir}} {{prompt}}"

DOWN_ON_Q09 = """

class DownOnQ09(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "q09":
            raise RuntimeError("API down: 503")
        return super().run_target(task, ctx, seed=seed)
"""


def commit(capsys, project: Path, tag: str, basis: str) -> tuple[int, str]:
    code, _, err = run(capsys, "commit", tag, str(project), "--decision", "reject", "--reject-basis", basis)
    return code, err


@pytest.mark.attack(
    "record",
    attack=(
        "`capevolve commit --reject-basis infra` (or `budget`) for a candidate that lost no rollout "
        "(or while the budget still fits one more evaluation), so the ledger blames the harness, not "
        "the edit"
    ),
    outcome="refused in one line: the basis needs its evidence in the log",
)
def test_infra_and_budget_rejects_need_their_evidence_in_the_record(example, projects, capevolve, capsys):
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"]).ret == 0
    code, err = commit(capsys, project, "careful", "infra")
    assert code == 2 and "the 12 logged rollout(s) of 'careful' have none" in err, err
    code, err = commit(capsys, project, "careful", "budget")
    assert code == 2 and "capevolve spend says one fits" in err, err
    assert err.strip().count("\n") == 0  # one line
    assert (
        not (projects.run_dir(project) / "LEDGER.md").exists()
        or "careful" not in (projects.run_dir(project) / "LEDGER.md").read_text()
    )

    # an API down on one task, and a ceiling the evaluation used up: both bases now hold
    down = example("toy_calc", "down")
    projects.add_adapter(down, DOWN_ON_Q09, "adapter.py:DownOnQ09")
    projects.edit_spec(down, "num_trials: 1", "num_trials: 1\nmax_metric_calls: 50")
    assert capevolve(down, "careful", gate=True, extra=["--capevolve-commit", "none"]).ret in (0, 12)
    assert commit(capsys, down, "careful", "budget")[0] == 0
    assert commit(capsys, down, "seed-null1", "infra")[0] == 0  # its q09 rollout was an infra error
    ledger = (projects.run_dir(down) / "LEDGER.md").read_text()
    assert "| careful | seed | reject | budget" in ledger and "| seed-null1 | seed | reject | infra" in ledger


def test_hill_climb_store_flags_focus_alias_finalized_run_and_the_new_run(example, projects, capsys):
    project = example("toy_calc")
    # the dropped command store: refused before anything runs, naming the two stores there are
    with pytest.raises(SystemExit) as exited:
        hill_climb(capsys, project, "--optimizer", OPTIMIZER, "--store-commit-cmd", "true {tag}")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--store-commit-cmd was dropped; commit candidates to git" in err, err
    assert not (project / ".capevolve").exists()
    # cap-evolve's back-compat focus name is the `all` schedule
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", OPTIMIZER, "--focus", "all-at-once", "--store", "copy"
    )
    assert code == 0 and summary["accepted"] == ["cand_0001"], err
    first_run = summary["run_id"]
    meta = json.loads((projects.run_dir(project) / "hill_climb" / "cand_0001" / "iteration.json").read_text())
    assert meta["focus_mode"] == "all"

    # measure says why train has no numbers, then pays it on request
    code, out, _ = run(capsys, "measure", str(project), "--no-finalize")
    assert code == 0
    assert "not evaluated: measure --train no (the default); --train auto pays its 12 rollouts" in out
    code, out, _ = run(capsys, "measure", str(project), "--train", "auto", "--finalize")
    assert code == 0
    train = [line.split()[:3] for line in out.splitlines() if line.startswith("train")]
    assert train == [["train", "seed", "seed"], ["train", "best", "cand_0001"]], out
    assert "best − seed on train:" in out

    # finalized: no work copy, and hill-climb names the way on — which it can now take
    code, _, err = run(capsys, "work", "new", "later", str(project))
    assert code == 2 and "is finalized" in err and "hill-climb --new-run" in err, err
    code, _, err = hill_climb(capsys, project, "--optimizer", OPTIMIZER, "--store", "copy")
    assert (
        code == 2
        and f"capevolve hill-climb {project} --optimizer '{OPTIMIZER}' --store copy --new-run" in err
    ), err
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", OPTIMIZER, "--store", "copy", "--new-run", "--max-iterations", "1"
    )
    assert code == 0 and summary["run_id"] != first_run, err
    assert "--new-run: a new run, its baseline first" in err
    # the same edit in the new run is the same bytes, accepted in the first run against the same
    # seed: adopted as the new run's best (tests/e2e/test_candidate_bytes.py goes on from there)
    assert [(r["decision"], r["basis"]) for r in summary["iterations"]] == [("accept", None)]
    code, _, err = hill_climb(capsys, project, "--optimizer", OPTIMIZER, "--new-run", "--resume")
    assert code == 2 and "--new-run starts a new run" in err


def test_signal_train_shows_the_optimizer_train_failures_and_pays_train_once_per_best(
    example, projects, capsys
):
    project = example("toy_calc")
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", OPTIMIZER, "--signal", "train", "--store", "copy"
    )
    assert code == 0 and summary["accepted"] == ["cand_0001"], err
    assert err.count("--signal train: evaluating seed on train") == 1
    run_dir = projects.run_dir(project)
    splits = json.loads((run_dir / "splits.json").read_text())
    prompt = (run_dir / "hill_climb" / "cand_0001" / "prompt.md").read_text()
    assert "## Failure index (parent `seed` on train)" in prompt
    focus = next(line for line in prompt.splitlines() if line.startswith("Fix these train tasks first: "))
    shown = focus.split(": ", 1)[1].split(", ")
    assert shown and set(shown) <= set(splits["train"]) and not set(shown) & set(splits["val"])
    # the seed was paid on train for the signal; the gate still read val only
    assert len(rollout_files(run_dir, "seed", "train")) == len(splits["train"])
    verdict = json.loads((run_dir / "verdicts" / "cand_0001.json").read_text())
    assert verdict["n_tasks"] == len(splits["val"])
    no_train = example("toy_calc", "no_train")
    projects.no_test_split(no_train)  # train 0.5, test 0: still a train split
    projects.edit_spec(no_train, "split_train: 0.5", "split_train: 0.0")
    projects.edit_spec(no_train, "split_test: 0.0", "split_test: 0.5")
    code, _, err = hill_climb(capsys, no_train, "--optimizer", OPTIMIZER, "--signal", "train")
    assert code == 2 and "--signal train: the run has no train split" in err, err
