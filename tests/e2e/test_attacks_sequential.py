"""Attacks on the sequential gate (``--capevolve-sequential``), whose null controls now follow the
candidates (issue 40): a candidate that shapes which of its rollouts count or when it is decided,
and the files its session's workers read (the stop marker)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from run_log import rollout_files

# appended to the candidate's tools/reply.py, which noisy_agent's run_target calls after it drew the
# answer (``draw`` and ``p_success`` are its locals, two frames up): on a failing draw it raises what
# no ``except Exception`` catches, which the sandbox child reports as the adapter's error (missing data)
ERROR_ON_FAILURE = """

import sys as _sys


class _Upstream(BaseException):
    pass


def closing_line(category, _closing=closing_line):
    frame = _sys._getframe()
    while frame is not None and "p_success" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None and frame.f_locals["draw"] >= frame.f_locals["p_success"]:
        raise _Upstream("upstream API 503 (retry later)")
    return _closing(category)
"""


def no_microcases(project: Path) -> None:
    for path in (project / "microcases").glob("*.yaml"):
        path.unlink()


def verdict(run_dir: Path, tag: str) -> dict:
    return json.loads((run_dir / "verdicts" / f"{tag}.json").read_text())


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a sequential gate: candidate code (the seed's bytes plus a reply tool) that raises an API-looking "
        "error on each failing draw, so every trial its e-process read was a pass: efficacy crossed after "
        "29 of 40 tasks, verdict accept (Δ̄ +0.17), with the floor of the nulls that followed it"
    ),
    outcome=(
        "prevented: an efficacy crossing with an infra error among the tasks it read stands only if the "
        "worst case crosses too (each trial whose first attempt errored a failure of the candidate, a pass "
        "of the best); until then the tag is undecided and val's exhaustion decides, with the error check's "
        "imputation (indecisive), in this session and after the errored trials are paid again"
    ),
)
def test_a_candidate_that_turns_its_failing_draws_into_errors_is_not_accepted_early(
    example, projects, capevolve
):
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    # a coverage floor the errors leave (each never-passing task has no valid trial of the candidate)
    projects.edit_spec(project, "min_coverage: 0.8", "min_coverage: 0.6")
    sneaky = project / "candidates" / "sneaky"
    shutil.copytree(project / "capability", sneaky)
    with (sneaky / "tools" / "reply.py").open("a") as handle:
        handle.write(ERROR_ON_FAILURE)
    said = []
    for _ in range(2):  # the second session pays the errored trials again: a fresh draw each
        said.append(capevolve(project, "sneaky", gate=True, extra=["--capevolve-sequential"]).stdout)
        run_dir = projects.run_dir(project)
        v = verdict(run_dir, "sneaky")
        assert v["infra_errors"]["candidate"] > 0 == v["infra_errors"]["best"], v["infra_errors"]
        assert v["decision"] != "accept", v["reason"]
        assert json.loads((run_dir / "state.json").read_text())["best_id"] == "seed"
    assert v["decision"] == "indecisive", v["reason"]
    # the first session ran val to its end for it: its crossing on the valid trials alone was not one
    said[0].fnmatch_lines(["sequential sneaky: no crossing over all 40 tasks*"])


class MarkerForger:
    """Stands in for unconfined code of the same user (candidate code's leftover process, a shell):
    once the session's stop marker exists, it adds ``tags`` to it, so the workers skip their rollouts."""

    def __init__(self, run_root: Path, tags: list[str]) -> None:
        self.run_root, self.tags, self.forged = run_root, tags, 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for marker in (self.run_root / "sequential-stop").glob("*.json"):
            stopped = set(json.loads(marker.read_text())["stopped"])
            if not set(self.tags) <= stopped:
                marker.write_text(json.dumps({"stopped": sorted(stopped | set(self.tags))}))
                self.forged += 1


def better_seed(example, projects) -> Path:
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    (project / "capability" / "prompt.md").write_text(
        (project / "candidates/regressed/prompt.md").read_text()
    )
    return project


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "a sequential gate's stop marker (`runs/<id>/sequential-stop/<token>.json`, read by the workers "
        "before each rollout) rewritten once it exists, the null controls added: they stopped after 13 of the "
        "14 tasks they follow the candidate to, their floor read where the writer chose, the accept booked "
        "(exit 12) and the calibration alarm told 'no null control gated yet'"
    ),
    outcome=(
        "prevented: the run dir is out of reach of candidate code and the optimizer (EACCES); only the "
        "session's controller writes the marker"
    ),
    unconfined=(
        "refused to book: a tag whose items were skipped as decided though the gate never stopped it makes "
        "an accept indecisive, those rollouts owed (nothing booked); the same command again pays them and "
        "decides as an untouched session does"
    ),
)
@pytest.mark.unconfined
def test_a_stop_marker_written_by_someone_else_books_nothing(example, projects, capevolve, pytester):
    """Unconfined, code of the same user can write the run dir, the stop marker included (confined, the
    kernel keeps candidate code and the optimizer out of it). Here a plugin of the test stands in for it,
    at a point it can choose deterministically: the first report after the marker appears."""
    project = better_seed(example, projects)
    assert capevolve(project).ret == 0  # the run, and the seed's val rollouts
    whole = example("noisy_agent", "untouched")
    shutil.rmtree(whole)
    shutil.copytree(project, whole)
    run_root = projects.run_dir(project)
    forger = MarkerForger(run_root, ["seed-null1", "seed-null2"])
    args = capevolve.args(project, "improved", gate=True, extra=["--capevolve-sequential"])
    forged = pytester.runpytest(*args, plugins=[forger])
    assert forger.forged == 1
    assert forged.ret == 12, forged.stdout.str()  # the skipped rollouts are owed
    v = verdict(run_root, "improved")
    assert (v["decision"], v["basis"]) == ("indecisive", "coverage"), v["reason"]
    assert (
        "seed-null1, seed-null2 were skipped as decided though this gate had not stopped them" in v["reason"]
    )
    assert json.loads((run_root / "state.json").read_text())["best_id"] == "seed"  # nothing booked
    # the way on: the same command again pays what was skipped and decides as an untouched session
    again = capevolve(project, "improved", gate=True, extra=["--capevolve-sequential"])
    assert again.ret == 0, again.stdout.str()
    assert capevolve(whole, "improved", gate=True, extra=["--capevolve-sequential"]).ret == 0
    keys = ("decision", "basis", "n_tasks", "delta_mean", "null_spread", "per_task")
    for tag in ("improved", "seed-null1", "seed-null2"):
        first, resumed = verdict(projects.run_dir(whole), tag), verdict(run_root, tag)
        assert {k: first[k] for k in keys} == {k: resumed[k] for k in keys}, tag
    assert json.loads((run_root / "state.json").read_text())["best_id"] == "improved"


@pytest.mark.attack(
    "record",
    attack=(
        "a sequential gate resumed after correctly chained `rollout` events were appended through the "
        "package's own API outside any session (a pass for each val task of a no-op): its e-process would "
        "read them when the session starts, decided and stopped before paying"
    ),
    outcome=(
        "refused before the gate reads the log, as a fixed gate's (exit 11, no accept): an event no "
        "logged claim holds is named"
    ),
)
def test_rollouts_forged_before_a_sequential_gate_are_refused_before_it_decides(example, projects, capevolve):
    from pytest_capevolve._store.rollouts.record import RolloutRecord
    from pytest_capevolve._store.rundir import RunDir

    project = example("noisy_agent")
    projects.one_trial_with_noop(project, "Be courteous.")
    assert capevolve(project).ret == 0  # the seed's val rollouts
    run_dir = projects.run_dir(project)
    seed_record = next(r for k, r in projects.rollout_records(project).items() if k[2] == "seed")
    rundir = RunDir(run_dir)
    for task_id in json.loads((run_dir / "splits.json").read_text())["val"]:
        rundir.rollouts.record_rollout(
            RolloutRecord(
                run_id=rundir.run_id,
                split="val",
                task_id=task_id,
                tag="noop",
                trial=0,
                seed=seed_record["seed"],
                candidate_hash="0" * 64,
                reward=1.0,
                passed=True,
                output="resolved",
            )
        )
    rundir.rollouts.flush(leaving=True)
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-sequential", "--capevolve-null", "0"])
    out = result.stdout.str()
    assert result.ret == 11, out[-3000:]
    assert "no session's claim holds it (written outside a session)" in out
    verdict_file = run_dir / "verdicts" / "noop.json"
    assert not verdict_file.exists() or json.loads(verdict_file.read_text())["decision"] != "accept"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["kind"] == "decision" and e.get("decision") == "accept"]


LUCKY_REDRAWS = '''

import dataclasses as _dataclasses


class LuckyRedraws(NoisyAgentAdapter):
    """An agent whose draws are not reproduced: a rollout paid again draws afresh (here, luckily, a
    pass). The session is interrupted at its 41st score() (Ctrl-C, deterministically; score runs in it)."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        folder = Path(ctx).name
        drawn = Path(__file__).parent / ".draws" / f"{folder}-{task.id}-{seed}"
        if drawn.exists():
            return _dataclasses.replace(rollout, output="resolved")
        drawn.parent.mkdir(exist_ok=True)
        drawn.touch()
        return rollout

    def score(self, task, rollout):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        if len(log.read_text().splitlines()) == 41:
            raise KeyboardInterrupt  # Ctrl-C
        return super().score(task, rollout)
'''


@pytest.mark.attack(
    "record",
    attack=(
        "a sequential gate interrupted before it decided, the files of the candidate's failing rollouts deleted, "
        "then resumed: each is logged as vanished and paid again with a fresh draw, and the e-process and "
        "the verdict read the redraw (a fixed gate reads a key's first valid outcome)"
    ),
    outcome=(
        "prevented: the sequential gate reads each key at the first valid outcome the log holds, as a fixed "
        "gate does (and refuses rollouts no session paid): the resumed session's stops and verdicts are an "
        "untouched one's"
    ),
)
@pytest.mark.unconfined
def test_a_resumed_sequential_gate_reads_no_redraw_of_a_deleted_rollout(example, projects, capevolve):
    """Unconfined: deleting files in the run dir needs no boundary to cross (confined, the run dir is out
    of reach). A gate interrupted at a fixed rollout, then copied (a project is its own wherever it
    lives): the copy has its candidate's failing files deleted."""

    def killed() -> Path:
        project = example("noisy_agent", "untouched")
        no_microcases(project)
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
        noop = project / "candidates" / "noop"
        shutil.copytree(project / "capability", noop)
        with (noop / "prompt.md").open("a") as handle:
            handle.write("\nBe courteous.\n")
        projects.add_adapter(project, LUCKY_REDRAWS, "adapter.py:LuckyRedraws")
        dead = capevolve(
            project,
            "noop",
            gate=True,
            extra=["--capevolve-sequential"],
            subprocess=True,
            timeout=300,
        )
        assert dead.ret == 2, dead.stdout.str()  # interrupted
        return project

    untouched = killed()
    molested = untouched.parent / "molested"
    shutil.copytree(untouched, molested, symlinks=True)
    failing = [
        path
        for path in rollout_files(projects.run_dir(molested), "noop")
        if json.loads(path.read_text())["reward"] == 0
    ]
    assert failing  # the no-op's failing draws among the first rollouts paid
    for path in failing:
        path.unlink()
    for project in (untouched, molested):
        result = capevolve(project, "noop", gate=True, extra=["--capevolve-sequential"])
        assert result.ret in (0, 10), result.stdout.str()
    repaid = [p for p in failing if p.exists()]
    assert repaid and all(json.loads(p.read_text())["reward"] == 1 for p in repaid)  # the lucky redraws
    keys = ("decision", "basis", "n_tasks", "delta_mean", "null_spread", "reason", "per_task")
    for tag in ("noop", "seed-null1", "seed-null2"):
        first, resumed = (verdict(projects.run_dir(p), tag) for p in (untouched, molested))
        assert {k: first[k] for k in keys} == {k: resumed[k] for k in keys}, tag


# appended to the candidate's tools/reply.py: every rollout, what its code could learn of its sequential
# order, as the closing line (the rollout's trace keeps it: the one way out of a confined child)
PEEK_ORDER = """

import os as _os
from pathlib import Path as _Path

_PROJECT = _Path({project!r})


def _peek(what, read):
    try:
        return what + ":" + read()
    except OSError as exc:
        return what + ":refused"


def _runs():
    runs = _PROJECT / ".capevolve" / "runs"
    return ",".join(str(p) for p in runs.rglob("*") if "secret" in p.parts or "sequential-stop" in p.parts)


def _proc(name):
    with open(f"/proc/{{_os.getppid()}}/{{name}}", "rb") as handle:
        return handle.read(1 << 16).hex()


def closing_line(category, _closing=closing_line):
    seen = [_peek("runs", _runs), _peek("environ", lambda: _proc("environ")), _peek("mem", lambda: _proc("mem"))]
    return _closing(category) + " | " + " ".join(seen)
"""


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "candidate code in a sequential gate (`-n 2`) that looks for its task order: the run's secret and "
        "nonces, the stop marker the workers read (`.capevolve/runs/<id>/secret/`, `sequential-stop/`), and "
        "the memory and environment of the process that scores it, which holds the plan the controller sent"
    ),
    outcome=(
        "prevented: the run dir is hidden (nothing listed) and the scoring process's memory cannot be read "
        "(`/proc/PPID/mem`: EPERM), nor, since session 31, its environment (the child holds no capability, "
        "even run as root; it was the child's own and held no secret or nonce). Knowing its order would help a candidate only to choose which draws count, which the worst "
        "case now holds"
    ),
    unconfined="readable (the run is labelled unconfined); what the order could buy is held as confined",
)
@pytest.mark.confined
def test_confined_candidate_code_cannot_learn_its_sequential_order(example, projects, capevolve, monkeypatch):
    import secrets as randomness

    from pytest_capevolve._confine.landlock import abi
    from pytest_capevolve._store.sessions import order_secret

    if abi() == 0:
        pytest.skip("the kernel offers no Landlock here")
    # a secret and nonces of their own (the suite fixes them for runs it compares)
    monkeypatch.setattr(order_secret, "new_secret", lambda: randomness.token_bytes(32))
    monkeypatch.setattr(order_secret, "new_nonce", lambda: randomness.token_bytes(32))
    project = better_seed(example, projects)
    peeker = project / "candidates" / "peeker"
    shutil.copytree(project / "candidates" / "improved", peeker)
    with (peeker / "tools" / "reply.py").open("a") as handle:
        handle.write(PEEK_ORDER.format(project=str(project)))
    result = capevolve(project, "peeker", gate=True, extra=["--capevolve-sequential", "-n", "2"])
    assert result.ret in (0, 10, 11), result.stdout.str()[-3000:]
    run_dir = projects.run_dir(project)
    secret = (run_dir / "secret" / "order.key").read_text().strip()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    nonces = [e["nonce"] for e in events if e["kind"] == "order_nonce_drawn"]
    assert secret and nonces
    replies = [json.loads(path.read_text())["trace"]["reply"] for path in rollout_files(run_dir, "peeker")]
    assert replies
    for reply in replies:
        seen = dict(part.split(":", 1) for part in reply.split(" | ", 1)[1].split(" "))
        assert seen["runs"] in ("", "refused") and seen["mem"] == "refused", reply  # hidden; not traceable
        assert seen["environ"] == "refused", reply  # the child holds no capability, even run as root
        environ = ""
        for said in (reply, environ):  # the scoring process's environment is the child's own
            assert secret not in said and not any(n in said for n in nonces)


class LyingWorker:
    """Stands in for a worker that lies about what it ran: each of ``tag``'s failing records is reported as
    a pass of a trial the plan never asked (its own trial + 100). The session records none of them (not
    owed): the record holds ``tag``'s passes alone, its failures owed."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):  # type: ignore[no-untyped-def]
        from pytest_capevolve._store.rollouts.record import RECORD_PROPERTY

        outcome = yield
        report = outcome.get_result()
        for i, (name, text) in enumerate(report.user_properties):
            if name == RECORD_PROPERTY:
                record = json.loads(text)
                if record["tag"] == self.tag and not record["passed"]:
                    record.update(trial=record["trial"] + 100, reward=1.0, passed=True)
                    report.user_properties[i] = (name, json.dumps(record))


@pytest.mark.attack(
    "session-runs",
    attack=(
        "a worker that lies about which trial it ran (each failing rollout of a no-op reported as a pass of a "
        "trial the plan never asked): the session recorded none of them, yet the sequential gate's "
        "e-processes read them: efficacy crossed, verdict accept (with `min_coverage: 0.5`, booked)"
    ),
    outcome=(
        "prevented: the sequential gate reads only what the session recorded, as it recorded it "
        "(`persistence.RECORDED`): the no-op is undecided, its failing rollouts owed (exit 12). What the "
        "exact gate then reads is the recorded cells, as a fixed gate's: with a `min_coverage` those "
        "omissions clear, it accepts (missing cells are not imputed; a design question for the lead)"
    ),
)
def test_the_sequential_gate_reads_only_what_the_session_recorded(example, projects, capevolve, pytester):
    project = example("noisy_agent")
    no_microcases(project)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    with (noop / "prompt.md").open("a") as handle:
        handle.write("\nBe courteous.\n")
    args = capevolve.args(
        project, "noop", gate=True, extra=["--capevolve-sequential", "--capevolve-null", "0"]
    )
    result = pytester.runpytest(*args, plugins=[LyingWorker("noop")])
    run_dir = projects.run_dir(project)
    recorded = [json.loads(p.read_text()) for p in rollout_files(run_dir, "noop")]
    assert recorded and all(r["passed"] for r in recorded)  # the lies were not recorded
    assert result.ret == 12, result.stdout.str()[-3000:]  # the no-op's failing rollouts are owed
    v = verdict(run_dir, "noop")
    assert v["decision"] != "accept" and v["basis"] != "sequential_efficacy", v["reason"]
    assert json.loads((run_dir / "state.json").read_text())["best_id"] == "seed"
    result.stdout.fnmatch_lines(["sequential noop: undecided after * of 40 tasks*"])  # no crossing read a lie
