"""The sequential gate, the val-reuse α budget and the calibration alarm, end to end on copies
of the noisy_agent example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import run_log

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.main import main

VAL_TASKS, TRIALS = 40, 5  # noisy_agent's val split and trials
WINDOW = TRIALS * 2  # the sequential scheduler's window: one task's rollouts of both tags


def no_microcases(project: Path) -> None:
    """The example's microcases screen refuses 'regressed' before any rollout; the sequential
    gate is about what rollouts show, so these copies go without them."""
    for path in (project / "microcases").glob("*.yaml"):
        path.unlink()


def rollout_files(run_dir: Path, tag: str) -> int:
    return len(run_log.rollout_files(run_dir, tag))


def verdict(run_dir: Path, tag: str) -> dict:
    return json.loads((run_dir / "verdicts" / f"{tag}.json").read_text())


def test_a_regressing_candidate_is_rejected_for_futility_before_half_of_val(
    example, projects, capevolve, xdist_args
):
    project = example("noisy_agent")
    no_microcases(project)
    result = capevolve(
        project,
        "regressed",
        gate=True,
        extra=["--capevolve-sequential", "--capevolve-null", "0", *xdist_args],
    )
    assert result.ret == 10, result.stdout.str()  # rejected
    run_dir = projects.run_dir(project)
    v = verdict(run_dir, "regressed")
    seq = v["details"]["sequential"]
    assert (v["decision"], v["basis"]) == ("reject", "sequential_futility")
    assert seq["e_futility"] >= seq["threshold_futility"] == 20
    assert seq["alpha_split"] == {"alpha": 0.05, "efficacy": 0.05, "exhaustion": 0.05, "futility": 0.05}
    assert v["alpha_budget"] == {"schedule": "constant", "j": 1, "alpha_j": 0.05, "alpha_round": 0.05}
    assert seq["tasks_seen"] < VAL_TASKS / 2  # decided before half of val (the same at any load)
    paid = rollout_files(run_dir, "regressed")
    assert v["n_tasks"] * TRIALS <= paid  # the verdict's numbers rest on rollouts that exist
    # what the design promises past the decision, whatever the machine's load: nothing in one
    # process; under -n, at most one window (a task's rollouts of both tags) per worker
    workers = int(xdist_args[1]) if xdist_args else 0
    assert paid <= seq["tasks_seen"] * TRIALS + WINDOW * workers, (paid, seq["tasks_seen"])
    saved = VAL_TASKS * TRIALS * 2 - paid - rollout_files(run_dir, "seed")
    assert saved > 0
    result.stdout.fnmatch_lines(
        [
            "*sequential regressed: stopped for futility after * of 40 tasks*",
            f"*sequential gate: the stop saved {saved} rollouts*",
            "*regressed: booked reject (gate)*",
        ]
    )
    assert not (run_dir / "sequential-stop").exists()  # the marker goes with the session
    # the same command again: the first decision stands (issue 25), said from the record,
    # before anything is paid
    again = capevolve(
        project,
        "regressed",
        gate=True,
        extra=["--capevolve-sequential", "--capevolve-null", "0", *xdist_args],
    )
    assert again.ret == 10, again.stdout.str()
    assert rollout_files(run_dir, "regressed") == paid, again.stdout.str()
    again.stdout.fnmatch_lines(
        [
            "regressed *REJECT*already decided*futility e-value*",
            "*rollouts: 0 paid*",
            "regressed: nothing booked — already decided (reject)",
        ]
    )


INTERRUPTING = '''

import os as _os
import signal as _signal


class Interrupting(NoisyAgentAdapter):
    """Ctrl-C, deterministically: the 61st rollout sends SIGINT to the session, from score(),
    which runs in it (run_target runs in a sandbox child, which cannot signal it when confined)."""

    def score(self, task, rollout):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        if len(log.read_text().splitlines()) == 61:
            _os.kill(_os.getpid(), _signal.SIGINT)
        return super().score(task, rollout)
'''


def test_workers_on_a_copy_of_the_project_stop_paying_once_decided(example, projects, capevolve, pytester):
    """Workers on a copy (docs/how-to/remote-workers.md: ``--tx …//chdir=COPY -d``) never read the
    controller's stop marker: the controller sends them no item of a decided tag, so each pays at most
    its window past the decision (they were sent every item: "stopped after 10 of 80 tasks … saved 0")."""
    import shutil

    project = example("noisy_agent", dest="origin/noisy_agent")
    no_microcases(project)
    copy = pytester.path / "remote" / "noisy_agent"
    shutil.copytree(project, copy)
    remote = ["--tx", f"2*popen//chdir={copy}", "-d"]
    result = capevolve(
        project, "regressed", gate=True, extra=["--capevolve-sequential", "--capevolve-null", "0", *remote]
    )
    assert result.ret == 10, result.stdout.str()
    run_dir = projects.run_dir(project)
    seq = verdict(run_dir, "regressed")["details"]["sequential"]
    assert seq["outcome"] == "futility" and seq["tasks_seen"] < VAL_TASKS
    assert not list(copy.glob(".capevolve/runs/*/sequential-stop/*"))  # no marker the workers could read
    paid = rollout_files(run_dir, "regressed")
    assert paid <= seq["tasks_seen"] * TRIALS + WINDOW * 2, (paid, seq["tasks_seen"])
    saved = VAL_TASKS * TRIALS * 2 - paid - rollout_files(run_dir, "seed")
    result.stdout.fnmatch_lines(
        [f"*sequential gate: the stop saved {saved} rollouts (of {VAL_TASKS * TRIALS * 2} *"]
    )


def test_an_interrupted_sequential_gate_says_undecided_with_its_e_value(example, projects, capevolve):
    project = example("noisy_agent")
    no_microcases(project)
    projects.add_adapter(project, INTERRUPTING, "adapter.py:Interrupting")
    # in a child process: an in-process run would hand the KeyboardInterrupt to this test
    result = capevolve(
        project,
        "improved",
        gate=True,
        extra=["--capevolve-sequential", "--capevolve-null", "0"],
        subprocess=True,
        timeout=300,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    run_dir = projects.run_dir(project)
    assert rollout_files(run_dir, "improved") + rollout_files(run_dir, "seed") == 60  # all saved
    v = verdict(run_dir, "improved")
    seq = v["details"]["sequential"]
    assert (v["decision"], v["basis"], seq["outcome"]) == ("undecided", "interrupted", "undecided")
    assert 0 < seq["e_efficacy"] < seq["threshold_efficacy"] and seq["tasks_seen"] == 6
    assert f"efficacy e-value {seq['e_efficacy']:.4g}" in v["reason"]
    assert "undecided" in v["reason"]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["best_id"] == "seed" and state["iterations"] == 0  # nothing booked
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["kind"] in ("decision", "gate_decision")]
    result.stdout.fnmatch_lines(
        ["*improved*UNDECIDED*", "*interrupted:*sequential gate wrote what it reached*"]
    )


def test_sequential_needs_a_gate(example, capevolve):
    project = example("noisy_agent")
    result = capevolve(project, "improved", extra=["--capevolve-sequential"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--capevolve-sequential decides a gate: add --capevolve-gate*"])
    # under a scheduler the sequential window does not replace, workers run ahead of the
    # decision: the stop would save nothing while the verdict says it stopped paying
    result = capevolve(
        project,
        "improved",
        extra=["--capevolve-gate", "--capevolve-sequential", "-n", "2", "--dist", "worksteal"],
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--capevolve-sequential with --dist worksteal: the early stop needs --dist load*"]
    )
    assert not list(project.glob(".capevolve/runs/*/rollouts/val/*.json"))


@pytest.fixture
def spend(capsys):
    def run(project: Path) -> dict:
        capsys.readouterr()
        assert main(["spend", str(project)]) == 0
        return json.loads(capsys.readouterr().out)

    return run


def test_basel_schedule_spends_a_shrinking_alpha_per_decision_and_spend_shows_the_next(
    example, projects, capevolve, spend
):
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # the schedule counts decisions, not trials
    projects.edit_spec(project, "gate_alpha: 0.05", "gate_alpha: 0.05\ngate_alpha_schedule: basel")
    first = capevolve(project, "regressed", "mixed", gate=True, extra=["--capevolve-null", "1"])
    assert first.ret == 10, first.stdout.str()
    run_dir = projects.run_dir(project)
    a1, a2, a3 = (0.05 * 6 / 3.141592653589793**2 / j**2 for j in (1, 2, 3))
    budget = [verdict(run_dir, tag)["alpha_budget"] for tag in ("regressed", "mixed")]
    assert [b["j"] for b in budget] == [1, 2]
    assert [b["alpha_j"] for b in budget] == pytest.approx([a1, a2], rel=1e-9)
    assert budget[0]["alpha_round"] == pytest.approx(a1 + a2, rel=1e-9)
    # the round is decided at the sum of its slots (Holm splits it between the two siblings)
    assert verdict(run_dir, "regressed")["details"]["family"]["alpha"] == pytest.approx(a1 + a2, rel=1e-9)
    reuse = spend(project)["val_reuse"]
    assert (reuse["schedule"], reuse["decisions"], reuse["val_tasks"]) == ("basel", 2, VAL_TASKS)
    assert reuse["next_alpha"] == round(a3, 6)  # the loop commands' JSON rounds to 6 decimals
    assert reuse["mde"] is not None and reuse["mde"] > 0
    assert reuse["any_false_accept_bound"] <= 0.05
    first.stdout.fnmatch_lines(
        ["*val reuse (basel): 2 gate decision(s) on val so far; the next gets α = 0.00338*"]
    )
    # the same session again: the same evidence judged twice is one decision, not two slots
    capevolve(project, "regressed", "mixed", gate=True, extra=["--capevolve-null", "1"])
    assert spend(project)["val_reuse"]["decisions"] == 2
    assert verdict(run_dir, "mixed")["alpha_budget"]["j"] == 2


def test_null_controls_accepted_too_often_raise_the_calibration_alarm(example, projects, capevolve, spend):
    """`threshold` at −0.2 (a legacy mode, badly set) accepts every null: the alarm must say so.
    (Three nulls: the alarm spends its 1 % across its looks, so 2 of 2 at α 0.05 — p = 0.0025
    at the second look, level 0.0015 — is not yet enough; 3 of 3 is, p = 1.25e-4.)"""
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # the rule accepts every null at any n
    projects.edit_spec(project, "gate_mode: exact", "gate_mode: threshold\ngate_threshold: -0.2")
    result = capevolve(project, "improved", gate=True, extra=["--capevolve-null", "3"])
    run_dir = projects.run_dir(project)
    accepted = sum(verdict(run_dir, f"seed-null{i}")["decision"] == "accept" for i in range(1, 4))
    assert accepted == 3  # what the test rests on: this gate really accepts every null
    message = "the gate is not holding its error rate on this project"
    result.stdout.fnmatch_lines([f"*CALIBRATION ALARM: {message}: null controls accepted 3 of 3*"])
    report = spend(project)
    assert report["calibration"]["alarm"] and report["calibration"]["accepts"] == accepted
    assert message in report["recommendation"]["reason"]
    assert message in (run_dir / "report.md").read_text()


def test_a_calibrated_gate_raises_no_alarm(improved_gated, spend):
    """The gate of 'improved' at two trials (the alarm counts decisions, not trials) with the
    spec's two null controls: the shared build (its microcases pass 'improved' before any rollout)."""
    project, result = improved_gated
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*null controls accepted 0 of 2 times over the run*"])
    calibration = spend(project)["calibration"]
    assert (calibration["nulls_gated"], calibration["accepts"], calibration["alarm"]) == (2, 0, False)


def test_a_clearly_better_candidate_stops_early_with_its_null_controls_and_saves_rollouts(
    example, projects, capevolve, xdist_args, capsys
):
    """Issue 40: with the default null controls the session stops once the candidate is decided;
    the nulls take the session's order and follow it, their floor read on the candidate's tasks."""
    from pytest_capevolve._decide import task_order

    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    # a worse seed (it upsells), so 'improved' (no upsell, checks fare classes) is far better
    (project / "capability" / "prompt.md").write_text(
        (project / "candidates/regressed/prompt.md").read_text()
    )
    result = capevolve(project, "improved", gate=True, extra=["--capevolve-sequential", *xdist_args])
    assert result.ret == 0, result.stdout.str()
    run_dir = projects.run_dir(project)
    v = verdict(run_dir, "improved")
    seq = v["details"]["sequential"]
    assert (v["decision"], v["basis"]) == ("accept", "sequential_efficacy")
    assert seq["e_efficacy"] >= 20 and v["n_tasks"] < VAL_TASKS
    assert v["nulls"] == ["seed-null1", "seed-null2"] and v["null_spread"] is not None  # the floor held
    assert json.loads((run_dir / "state.json").read_text())["best_id"] == "improved"
    decided_on = set(v["per_task"])
    for tag in v["nulls"]:
        null = verdict(run_dir, tag)
        nseq = null["details"]["sequential"]
        # one candidate: the session's order is its order; the null followed it to its decision
        assert nseq["order"] == seq["order"] and nseq["order_from"]["derivation"] == task_order.INTERLEAVED
        assert nseq["order_from"]["candidates"] == {"improved": seq["order_from"]}
        assert (nseq["outcome"], nseq["followed_tasks"]) == ("followed", len(decided_on))
        assert set(null["per_task"]) == decided_on  # its floor is read on the candidate's tasks
        assert null["reason"].startswith(
            f"followed the candidates: stopped with them after {len(decided_on)}"
        )
    tags = ["improved", "seed", *v["nulls"]]
    planned = VAL_TASKS * 2 * len(tags)
    saved = planned - sum(rollout_files(run_dir, tag) for tag in tags)
    assert saved > 0
    result.stdout.fnmatch_lines(
        [
            "*sequential improved: stopped for efficacy after * of 40 tasks*",
            f"*sequential seed-null1: followed the candidates: stopped with them after {len(decided_on)} of 40*",
            f"*sequential gate: the stop saved {saved} rollouts (of {planned} planned*",
        ]
    )
    # `capevolve gate` re-derives the fixed-n gate on the prefix, not the sequential rule: a what-if
    # naming the decision (it printed INDECISIVE and exited 11 for this booked accept)
    capsys.readouterr()
    assert main(["gate", "improved", "--project", str(project), "--json"]) == exitcodes.WHAT_IF
    what_if = json.loads(capsys.readouterr().out)["what_if"]
    assert what_if["booked"] == "accept"
    assert "sequential, accept by sequential_efficacy after" in what_if["line"]
    assert "does not replay a sequential decision: verdicts/improved.json holds it" in what_if["line"]


KILLED = '''

import os as _os
import signal as _signal


class Killed(NoisyAgentAdapter):
    """kill -9, deterministically: the session dies at its 41st score(), which runs in it."""

    def score(self, task, rollout):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        if len(log.read_text().splitlines()) == 41:
            _os.kill(_os.getpid(), _signal.SIGKILL)
        return super().score(task, rollout)
'''


def test_a_killed_sequential_gate_resumes_to_the_same_stops_and_verdicts(example, projects, capevolve):
    """The stops, the nulls' follow included, are a function of the persisted rollouts: a session
    killed before the candidate is decided, run again, pays and decides what one whole session does."""

    def better(dest: str) -> Path:
        project = example("noisy_agent", dest)
        no_microcases(project)
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
        (project / "capability" / "prompt.md").write_text(
            (project / "candidates/regressed/prompt.md").read_text()
        )
        return project

    args = dict(gate=True, extra=["--capevolve-sequential"])
    whole = better("whole")
    assert capevolve(whole, "improved", **args).ret == 0
    killed = better("killed")
    projects.add_adapter(killed, KILLED, "adapter.py:Killed")
    # the child draws the order secret and nonce the suite fixes in this process (tests/conftest.py)
    child = dict(gate=True, extra=args["extra"], subprocess=True, timeout=300)
    dead = capevolve(killed, "improved", **child)
    assert dead.ret != 0, dead.stdout.str()
    tags = ["improved", "seed", "seed-null1", "seed-null2"]
    assert sum(rollout_files(projects.run_dir(killed), t) for t in tags) == 40  # the 41st died with it
    again = capevolve(killed, "improved", **args)
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["rollouts: * paid, 40 reused*"])  # the same run, taken over
    assert len(list((killed / ".capevolve" / "runs").iterdir())) == 1
    runs = [projects.run_dir(p) for p in (whole, killed)]
    assert [rollout_files(runs[0], t) for t in tags] == [rollout_files(runs[1], t) for t in tags]
    keys = ("decision", "basis", "n_tasks", "delta_mean", "null_spread", "reason", "per_task")
    for tag in ("improved", "seed-null1", "seed-null2"):
        first, resumed = (verdict(r, tag) for r in runs)
        assert {k: first[k] for k in keys} == {k: resumed[k] for k in keys}, tag
        assert first["details"]["sequential"]["outcome"] == resumed["details"]["sequential"]["outcome"]
    assert verdict(runs[1], "seed-null1")["details"]["sequential"]["outcome"] == "followed"


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate's task order read from the source, the gains placed first; or computed from "
        "the run's secret (readable by the same user) for byte variants ground until one puts its "
        "gains first"
    ),
)
def test_the_order_is_keyed_by_the_runs_secret_and_recorded_so_the_decision_can_be_rederived(
    example, projects, capevolve, monkeypatch
):
    """Issue 25, item 8: the order comes from the candidate's bytes and the run's secret (never in
    a candidate folder or snapshot), and the verdict records it: the e-process fed the recorded
    per-task deltas in the recorded order stops where the verdict says."""
    import secrets as randomness

    from pytest_capevolve._decide import stopping, task_order
    from pytest_capevolve._project.candidate import content_hash as bytes_of
    from pytest_capevolve._store.sessions import order_secret

    monkeypatch.setattr(order_secret, "new_nonce", lambda: randomness.token_bytes(32))
    project = example("noisy_agent")
    no_microcases(project)
    # the attack: with the run made and its secret readable (same user), compute the order the
    # candidate's bytes would be gated in, before gating them (a grinder of byte variants does
    # this to pick the variant whose gains come first)
    assert capevolve(project).ret == 0
    run_dir = projects.run_dir(project)
    secret = bytes.fromhex((run_dir / "secret" / "order.key").read_text())
    val = json.loads((run_dir / "splits.json").read_text())["val"]
    predicted = task_order.task_order(val, secret, bytes_of(project / "candidates" / "regressed"))
    result = capevolve(
        project, "regressed", gate=True, extra=["--capevolve-sequential", "--capevolve-null", "0"]
    )
    assert result.ret == 10, result.stdout.str()
    v = verdict(run_dir, "regressed")
    seq = v["details"]["sequential"]
    assert seq["order"] != predicted  # the nonce did not exist until the gate planned these bytes
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    committed = [e["sha256"] for e in events if e["kind"] == "order_secret_created"]
    assert committed == [task_order.commitment(secret)] == [seq["order_from"]["secret_sha256"]]
    content_hash = json.loads((run_dir / "candidates" / "regressed" / "candidate.json").read_text())[
        "content_hash"
    ]
    assert seq["order_from"]["content_hash"] == content_hash
    nonces = [
        e["nonce"] for e in events if e["kind"] == "order_nonce_drawn" and e["content_hash"] == content_hash
    ]
    assert nonces[:1] == [seq["order_from"]["nonce"]]
    assert seq["order"] == task_order.task_order(val, secret, content_hash, bytes.fromhex(nonces[0]))
    deltas = [
        v["per_task"][t]["delta"] for t in seq["order"] if v["per_task"].get(t, {}).get("delta") is not None
    ]
    again = stopping.track(
        deltas, alpha=stopping.split(v["alpha"]), min_effect=seq["min_effect"], total_tasks=seq["tasks_total"]
    )
    assert (again.state.stopped, again.state.tasks) == (seq["outcome"], seq["tasks_seen"])
    # the secret is in no candidate folder, snapshot or work copy
    hex_secret = secret.hex()
    for path in project.rglob("*"):
        if path.is_file() and path != run_dir / "secret" / "order.key" and path.stat().st_size < 2_000_000:
            assert hex_secret not in path.read_text(errors="ignore"), path
