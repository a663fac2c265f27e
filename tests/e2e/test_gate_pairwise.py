"""``gate_mode: pairwise`` in a gate session: the adapter's ``prefer()`` judges each task's
stored outputs of the candidate and the best in both orders after the run loop, each
judgement logged; the verdict is the sign test on the net preferences; ``capevolve gate``
re-derives it from the log without judging again."""

from __future__ import annotations

import json

from pairwise_judge import JUDGE

from pytest_capevolve._cli.main import main

FLAKY = """


class Flaky(Compared):
    def prefer(self, task, output_a, output_b, *, seed):
        if task.id in ("q01", "q02"):
            raise RuntimeError("judge API down")
        return super().prefer(task, output_a, output_b, seed=seed)
"""


def preference_events(project, projects):
    lines = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == "preference"]


def test_a_gate_session_judges_both_orders_logs_them_and_capevolve_gate_rereads_them(
    example, projects, capevolve, capsys, xdist_args
):
    """The same verdict with and without xdist: the controller judges, after the run loop."""
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE, "adapter.py:Compared")
    projects.edit_spec(project, "split_val: 0.5", "split_val: 0.75\ngate_mode: pairwise")
    projects.edit_spec(project, "split_train: 0.25", "split_train: 0.125")
    projects.edit_spec(project, "split_test: 0.25", "split_test: 0.125")
    result = capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none", *xdist_args])
    assert result.ret == 0, result.stdout.str()
    # the nulls' reward spread is printed, but it is no bar here (a new user read it as one)
    result.stdout.fnmatch_lines(["noise floor from null controls: *(no bar under gate_mode pairwise*"])
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    assert (verdict["decision"], verdict["basis"], verdict["mode"]) == ("accept", "pairwise", "pairwise")
    multiplications = sum(t.startswith("q") and int(t[1:]) % 3 == 1 for t in verdict["per_task"])
    assert f"preferred on {multiplications} tasks, the best on 0" in verdict["reason"]
    assert verdict["p_exact"] == f"1/{2**multiplications}"
    events = preference_events(project, projects)
    careful = [e for e in events if e["tag"] == "careful"]
    assert {e["order"] for e in careful} == {"AB", "BA"} and len(careful) == 2 * verdict["n_tasks"]
    # the lean to the first output cancels: on a task where the answers agree, one A and one B
    same = [e for e in careful if int(e["task_id"][1:]) % 3 != 1]
    said = [e["preference"] for e in same]
    assert same and said.count("A") == said.count("B") == len(same) // 2

    capsys.readouterr()
    assert main(["gate", "careful", "--project", str(project), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["decision"], again["p_exact"]) == ("accept", verdict["p_exact"])
    assert preference_events(project, projects) == events  # re-read, not judged again


def test_pairwise_without_prefer_or_in_a_kind_that_decides_on_rewards_is_refused_before_paying(
    example, projects, capevolve, capsys
):
    project = example("toy_calc")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\ngate_mode: pairwise")
    result = capevolve(project, "careful", gate=True)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*gate_mode pairwise*prefer(task, output_a, output_b, *, seed)*define it*"])
    # a sequential gate decides on rewards alone (it accepted here on them, unasked, before this)
    projects.add_adapter(project, JUDGE, "adapter.py:Compared")
    result = capevolve(project, "careful", gate=True, extra=["--capevolve-sequential"])
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--capevolve-sequential decides on rewards*--capevolve-gate alone*"])
    runs = project / ".capevolve" / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing planned, nothing paid
    # and capevolve check says so first, not "ok"
    checked = example("toy_calc", "unchecked")
    projects.edit_spec(checked, "num_trials: 1", "num_trials: 1\ngate_mode: pairwise")
    capsys.readouterr()
    assert main(["check", str(checked)]) == 1
    assert "FAIL  adapter adapter.py:ToyCalcAdapter: gate_mode pairwise" in capsys.readouterr().out


def test_a_judge_that_fails_leaves_missing_data_said_in_the_verdict(example, projects, capevolve):
    project = example("toy_calc")
    projects.add_adapter(project, JUDGE + FLAKY, "adapter.py:Flaky")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\ngate_mode: pairwise")
    result = capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret == 11, result.stdout.str()
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    failed = [t for t in ("q01", "q02") if t in verdict["per_task"]]
    assert failed and verdict["basis"] == "pairwise"
    # 5 to 0 judged; the unjudged cell at worst (the best preferred in both) makes it 5 to 1
    assert verdict["decision"] == "indecisive" and "could flip the decision" in verdict["reason"]
    said = [w for w in verdict["warnings"] if "not judged" in w]
    assert said == [
        f"{len(failed)} paired trial(s) not judged (missing data; a gate session asks them again): "
        f"{failed[0]} trial 0: judge API down"
    ]
    judged = {e["task_id"] for e in preference_events(project, projects) if e["tag"] == "careful"}
    assert judged == set(verdict["per_task"]) - set(failed)
