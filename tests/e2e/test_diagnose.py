"""`capevolve diagnose`: per-task bands, failure clusters, kept_good, the split comparison and the
reflective export (gold redacted) — from persisted rollouts of real sessions; pays nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from pytest_capevolve._cli.main import main

# Feedback that gives the gold answer away and names the task's half; an API down for one task.
TATTLER = """

class Tattler(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "q09":
            raise RuntimeError("API down: 503 for request 7f3a9c2e11")
        return super().run_target(task, ctx, seed=seed)

    def score(self, task, rollout):
        scored = super().score(task, rollout)
        if scored.reward == 1.0:
            return scored
        half = "early" if int(task.id[1:]) < 6 else "late"
        feedback = f"{half} slip: expected {task.target}, got {rollout.output} for '{task.input}'"
        return Score(reward=0.0, feedback=feedback)
"""
IDS = [f"q{i:02d}" for i in range(24)]


def make_tattler(example, projects, dest: str = "toy_calc", *, halves: bool = True) -> Path:
    """toy_calc with the Tattler adapter and fixed splits: train q00-q05, val q06-q17, test
    q18-q23; ``halves=False`` makes its feedback the same on both halves."""
    project = example("toy_calc", dest)
    source = TATTLER if halves else TATTLER.replace('"early" if int(task.id[1:]) < 6 else "late"', '"any"')
    projects.add_adapter(project, source, "adapter.py:Tattler")
    (project / "splits.yaml").write_text(
        yaml.safe_dump({"train": IDS[:6], "val": IDS[6:18], "test": IDS[18:]})
    )
    spec = project / "capevolve.yaml"
    text = "\n".join(line for line in spec.read_text().splitlines() if not line.startswith("split_"))
    spec.write_text(text + "\nsplit_ids_file: splits.yaml\n")
    return project


@pytest.fixture
def tattler(example, projects):
    return make_tattler(example, projects)


@pytest.fixture
def diagnose(capsys):
    """``diagnose(project, tag, *args) -> dict``: run `capevolve diagnose` and read its JSON."""

    def run(project: Path, tag: str, *args: str) -> dict:
        capsys.readouterr()
        assert main(["diagnose", tag, str(project), *args]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        return json.loads(out)

    return run


def test_bands_clusters_and_kept_good_match_the_rollout_files(
    example, projects, capevolve, diagnose, capsys, monkeypatch
):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 3")
    assert capevolve(project).ret == 0
    report = diagnose(project, "seed")

    passes: dict[str, list[bool]] = {}
    for (split, task, tag, _k), record in projects.rollout_records(project).items():
        if split == "val" and tag == "seed":
            passes.setdefault(task, []).append(record["passed"])
    for row in report["tasks"]:
        seen = passes[row["task_id"]]
        assert (row["passes"], row["trials"]) == (sum(seen), len(seen)) == (row["passes"], 3)
        want = "defect" if not any(seen) else "solid" if all(seen) else "unstable"
        assert row["band"] == want
    bands = report["bands"]
    assert bands["defect"] and bands["unstable"] and bands["solid"]  # noisy: all three occur
    assert report["kept_good"] == [t["task_id"] for t in report["tasks"] if t["band"] == "solid"]

    [cluster] = report["clusters"]  # the noisy agent's scorer says one thing on every failure
    assert cluster["signature"] == "ticket escalated: customer not helped"
    assert cluster["count"] == report["failing_rollouts"] == sum(not p for v in passes.values() for p in v)
    failing_tasks = {t["task_id"] for t in report["tasks"] if t["band"] in ("defect", "unstable")}
    assert set(cluster["tasks"]) == failing_tasks
    example_file = project / cluster["example_rollout"]
    assert json.loads(example_file.read_text())["feedback"] == cluster["example_feedback"]

    capsys.readouterr()
    # from the project's parent, as the README's quickstart leaves its reader: the example rollout
    # the table names opens from there (it was the project's own path, .capevolve/…, not found)
    monkeypatch.chdir(project.parent)
    assert main(["diagnose", "seed", project.name, "--table"]) == 0
    table = capsys.readouterr().out
    assert "ticket escalated: customer not helped" in table and "kept_good (do not break):" in table
    named = re.search(r"   e\.g\. (\S+)$", table, re.MULTILINE)
    assert named is not None and Path(named[1]).is_file(), table


def test_infra_errors_are_counted_apart_and_the_export_redacts_gold(tattler, capevolve, diagnose, tmp_path):
    assert capevolve(tattler).ret == 12  # the infra error on q09
    out = tmp_path / "reflective.jsonl"
    report = diagnose(tattler, "seed", "--export", str(out))

    by_task = {t["task_id"]: t for t in report["tasks"]}
    (file,) = by_task["q09"].pop("rollouts")  # its one rollout's file, named from the run's secret
    assert json.loads((tattler / file).read_text())["task_id"] == "q09"
    assert by_task["q09"] == {
        "task_id": "q09", "passes": 0, "trials": 0, "band": "missing", "mean_reward": None, "infra_errors": 1
    }  # fmt: skip
    assert report["bands"] == {"defect": 8, "unstable": 0, "solid": 3, "missing": 1}
    assert report["kept_good"] == ["q06", "q12", "q15"]
    [infra] = report["infra_errors"]["clusters"]
    assert infra["tasks"] == ["q09"] and "<id>" in infra["signature"] and "<n>" in infra["signature"]
    # the two defects ('*' and '-') stay two clusters: the quoted question keeps its operator
    assert [(c["signature"], c["count"]) for c in report["clusters"]] == [
        ("late slip: expected <n>, got <n> for '<n> * <n>'", 4),
        ("late slip: expected <n>, got <n> for '<n> - <n>'", 4),
    ]
    loose = diagnose(tattler, "seed", "--cluster", "loose")["clusters"]
    assert [(c["signature"], c["count"]) for c in loose] == [
        ("late slip: expected <n>, got <n> for <str>", 8)
    ]
    exact = diagnose(tattler, "seed", "--cluster", "exact")["clusters"]
    assert len(exact) == 8 and all(c["count"] == 1 for c in exact)  # every feedback differs

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert report["export"]["rows"] == len(rows) == 8
    assert {r["task_id"] for r in rows} == {"q07", "q08", "q10", "q11", "q13", "q14", "q16", "q17"}
    for row in rows:
        a, op, b = row["input"].split()
        gold = {"*": int(a) * int(b), "-": int(a) - int(b)}[op]
        assert row["feedback"].startswith("late slip: expected [gold answer redacted], got ")
        assert not re.search(rf"(?<![\w.]){re.escape(str(gold))}(?!\w)", json.dumps(row))
        assert row["output"] != gold and row["reward"] == 0.0 and Path(tattler / row["rollout"]).is_file()


def test_compare_split_reports_the_overlap_or_says_the_splits_are_disjoint(
    tattler, example, projects, capevolve, diagnose
):
    capevolve(tattler)
    capevolve(tattler, extra=["--capevolve-split", "train"])
    report = diagnose(tattler, "seed", "--compare-split", "train", "--cluster", "loose")
    cmp = report["compare"]
    assert cmp["split"] == "train" and cmp["disjoint"] is True and cmp["shared"] == []
    assert cmp["only_val"] == ["late slip: expected <n>, got <n> for <str>"]
    assert cmp["only_train"] == ["early slip: expected <n>, got <n> for <str>"]
    assert "no edit driven by one split's failures can move the other's mean" in cmp["note"]

    # without the half in the feedback, the clusters coincide
    same = make_tattler(example, projects, "same_feedback", halves=False)
    capevolve(same)
    capevolve(same, extra=["--capevolve-split", "train"])
    cmp = diagnose(same, "seed", "--compare-split", "train", "--cluster", "loose")["compare"]
    assert cmp["disjoint"] is False and cmp["shared"] == ["any slip: expected <n>, got <n> for <str>"]
    assert "can move the val mean" in cmp["note"]


def test_diagnose_refuses_the_sealed_split_and_what_it_cannot_read(tattler, capevolve, capsys):
    def refused(*args: str, code: int = 2) -> str:
        capsys.readouterr()
        assert main(["diagnose", *args]) == code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        return err[0]

    assert "no run" in refused("seed", str(tattler), code=4)  # no run yet: exit 4, as in every command
    capevolve(tattler)
    assert "test split is sealed" in refused("seed", str(tattler), "--split", "test")
    assert "test split is sealed" in refused("seed", str(tattler), "--compare-split", "test")
    assert "unknown tag 'nope'" in (said := refused("nope", str(tattler)))
    assert "once a gate session has evaluated it" in said  # the way on, not only the known tags
    assert "no train rollouts" in refused("seed", str(tattler), "--compare-split", "train")
    assert "inside the capability folder" in refused(
        "seed", str(tattler), "--export", str(tattler / "capability" / "x.jsonl")
    )
    assert not (tattler / "capability" / "x.jsonl").exists()
