"""A request sent ahead to a sandbox child (Sandboxes.send_ahead): collected by the run asking
for the same rollout; dropped (read, not used) when another is asked for; lost with its child
like any rollout, never taken for the next one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_capevolve import Task
from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
from pytest_capevolve._engine.sandbox import isolated
from pytest_capevolve._engine.sandbox_process import AHEAD_BYTES
from pytest_capevolve._project.adapter import load_adapter
from pytest_capevolve._project.spec import load_spec

ADAPTER = """
import json, os
from pytest_capevolve import Rollout, Score

class Adapter:
    def tasks(self, split):
        return []
    def run_target(self, task, ctx, *, seed):
        with open(os.path.join(os.path.dirname(__file__), "observed", "calls.log"), "a") as out:
            out.write(json.dumps([task.id, seed]) + "\\n")
        if task.input == "exit":
            os._exit(3)
        if task.input == "early":  # its answer's first byte now, the rest after its deadline
            import gc, signal, time
            from pytest_capevolve._engine import sandbox_child, wire
            child = next(o for o in gc.get_objects() if type(o).__name__ == "Child")
            os.write(child.proto_out, b"\\0")
            def rest(fd, *parts):
                sandbox_child.write_frame = wire.write_frame
                os.write(fd, wire.HEADER.pack(sum(map(len, parts)))[1:] + b"".join(parts))
            sandbox_child.write_frame = rest
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(1.5)
        if task.input in ("forge", "forge-and-wait"):  # a well-formed pass for the request sent next
            import gc, sys
            from pytest_capevolve._engine.runner import Scored
            child = next(o for o in gc.get_objects() if type(o).__name__ == "Child")
            frame = sys._getframe()
            while frame.f_code.co_name != "serve":
                frame = frame.f_back
            asked = frame.f_locals["request"][0]
            child.answer(asked + 1, Scored(rollout=Rollout(task_id="two", output="two:5")))
            if task.input == "forge-and-wait":  # its child starts nothing else before it is killed
                import time
                time.sleep(60)
        if task.input == "deaf":  # deaf to its deadline: only a kill ends it
            import signal, time
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(60)
        return Rollout(task_id=task.id, output=f"{task.id}:{seed}")
    def score(self, task, rollout):
        return Score(reward=1.0)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "adapter.py").write_text(ADAPTER)
    (tmp_path / "capability").mkdir()
    (tmp_path / "observed").mkdir()  # where run_target notes its calls, as a user is told to
    spec = "adapter: adapter.py:Adapter\ncapability_path: capability\nsandbox_writable: [observed]\n"
    (tmp_path / "capevolve.yaml").write_text(spec)
    return tmp_path


@pytest.fixture
def runner(project: Path) -> Iterator[AdapterRunner]:
    """The project's adapter behind its sandbox children, closed after the test."""
    runner = isolated(
        load_adapter("adapter.py:Adapter", project), "adapter.py:Adapter", project, spec=load_spec(project)
    )
    yield runner
    runner.close()


def calls(project: Path) -> list[list[object]]:
    return [json.loads(line) for line in (project / "observed" / "calls.log").read_text().splitlines()]


def test_a_rollout_sent_ahead_is_run_once_and_collected_by_its_run(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, two = Task(id="one", input=1), Task(id="two", input=2)
    assert not runner.targets.send_ahead(one, capability, seed=0, split="val", timeout_s=None)  # no child yet
    assert run_and_score(runner, one, capability, seed=0, split="val").rollout.output == "one:0"
    assert runner.targets.send_ahead(two, capability, seed=5, split="val", timeout_s=None)
    # the child runs it before anyone asks for it
    assert run_and_score(runner, two, capability, seed=5, split="val").rollout.output == "two:5"
    assert calls(project) == [["one", 0], ["two", 5]]


def test_an_answer_sent_ahead_for_another_rollout_is_dropped(runner: AdapterRunner, project: Path) -> None:
    capability = project / "capability"
    one, two = Task(id="one", input=1), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val")
    assert runner.targets.send_ahead(two, capability, seed=5, split="val", timeout_s=None)
    # another seed is asked for: the answer sent ahead is not taken for it
    scored = run_and_score(runner, two, capability, seed=6, split="val")
    assert scored.rollout.output == "two:6" and scored.infra_error is None
    assert run_and_score(runner, two, capability, seed=5, split="val").rollout.output == "two:5"
    assert calls(project) == [["one", 0], ["two", 5], ["two", 6], ["two", 5]]


def test_a_child_that_dies_running_a_rollout_sent_ahead_loses_that_rollout_only(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, fatal = Task(id="one", input=1), Task(id="fatal", input="exit")
    run_and_score(runner, one, capability, seed=0, split="val")
    assert runner.targets.send_ahead(fatal, capability, seed=1, split="val", timeout_s=None)
    lost = run_and_score(runner, fatal, capability, seed=1, split="val")
    # the candidate's failure (issue 37): a 0 labelled with the death, never missing data
    assert lost.reward == 0.0 and lost.rollout is None and "exit code 3" in (lost.caused or "")
    assert lost.infra_error is None and lost.feedback.startswith("candidate failure: ")
    # the next rollout: a new child, its own answer
    assert run_and_score(runner, one, capability, seed=2, split="val").rollout.output == "one:2"
    assert calls(project) == [["one", 0], ["fatal", 1], ["one", 2]]


def test_a_rollout_sent_ahead_that_outlives_its_deadline_is_killed_as_a_timeout(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, deaf = Task(id="one", input=1), Task(id="deaf", input="deaf")
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=0.5)
    assert runner.targets.send_ahead(deaf, capability, seed=1, split="val", timeout_s=0.5)
    late = run_and_score(runner, deaf, capability, seed=1, split="val", timeout_s=0.5)
    assert late.reward == 0.0 and "timeout" in (late.caused or "")
    assert "killed" in (late.caused or "") and late.infra_error is None
    assert run_and_score(runner, one, capability, seed=2, split="val", timeout_s=0.5).reward == 1.0


@pytest.mark.parametrize("scoring_s", [1.0, 3.0], ids=["within-grace", "past-grace"])
def test_a_rollout_sent_ahead_is_timed_by_its_answer_not_by_a_slow_score_of_the_last(
    runner: AdapterRunner, project: Path, scoring_s: float
) -> None:
    # the session takes longer than the rollout's deadline to score and persist the one before
    # (an LLM judge, a test suite): the rollout sent ahead answered at once, and is a reward,
    # never a timeout (missing data, paid again) nor "killed"; its seconds are its own
    capability = project / "capability"
    one, two = Task(id="one", input=1), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=0.5)
    assert runner.targets.send_ahead(two, capability, seed=1, split="val", timeout_s=0.5)
    time.sleep(scoring_s)  # the last rollout scored, persisted, reported
    scored = run_and_score(runner, two, capability, seed=1, split="val", timeout_s=0.5)
    assert scored.infra_error is None and scored.reward == 1.0, scored.infra_error
    assert scored.rollout.output == "two:1" and scored.seconds < 0.5
    # the same child answers the next one: it was never killed
    assert run_and_score(runner, one, capability, seed=2, split="val", timeout_s=0.5).reward == 1.0
    assert calls(project) == [["one", 0], ["two", 1], ["one", 2]]


@pytest.mark.parametrize("ahead", [True, False], ids=["sent-ahead", "asked-for"])
def test_an_answer_begun_early_and_finished_late_is_late(
    runner: AdapterRunner, project: Path, ahead: bool
) -> None:
    # candidate code writes its answer's first byte at once and the rest after its deadline:
    # a rollout is timed to its whole answer, never to a byte it chose to send early
    capability = project / "capability"
    one, early = Task(id="one", input=1), Task(id="early", input="early")
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=0.5)
    if ahead:
        assert runner.targets.send_ahead(early, capability, seed=1, split="val", timeout_s=0.5)
    scored = run_and_score(runner, early, capability, seed=1, split="val", timeout_s=0.5)
    assert scored.reward == 0.0 and "timeout" in (scored.caused or ""), scored
    assert scored.seconds > 1.0


def test_a_death_read_before_its_rollout_sent_ahead_is_collected_is_not_run_again(
    runner: AdapterRunner, project: Path
) -> None:
    # the child dies running the rollout sent ahead and its reader has booked the death before
    # the session asks for that rollout (a slow score of the one before, a loaded machine): the
    # rollout is the candidate's failure, never run again in a new child (a re-roll it chose)
    capability = project / "capability"
    one, fatal = Task(id="one", input=1), Task(id="fatal", input="exit")
    run_and_score(runner, one, capability, seed=0, split="val")
    assert runner.targets.send_ahead(fatal, capability, seed=1, split="val", timeout_s=None)
    sandbox = runner.targets._children[str(capability)]
    assert sandbox.ahead is not None and sandbox.proc.wait() == 3  # dead before it is collected
    lost = run_and_score(runner, fatal, capability, seed=1, split="val")
    assert lost.reward == 0.0 and "exit code 3" in (lost.caused or ""), lost
    assert calls(project) == [["one", 0], ["fatal", 1]]


@pytest.mark.attack(
    "candidate-code",
    attack="candidate code that writes, on its child's pipe and ahead of its own answer, a well-formed "
    "answer (a pass) for the request the session will send ahead next, so that the scoring process, "
    "which reads that pipe first and waits only when it is empty, takes it for a rollout the child never ran",
    outcome="prevented: an answer carries its request's id, and one for another request than the one "
    "read for is refused: the child is killed and the rollout it ran is the candidate's failure (a 0); "
    "the next rollout is run by a new child and answered by it",
)
def test_an_answer_forged_for_the_request_sent_next_is_never_taken_for_it(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, forge, two = Task(id="one", input=1), Task(id="forge", input="forge"), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val")
    assert runner.targets.send_ahead(forge, capability, seed=1, split="val", timeout_s=None)
    forged = run_and_score(runner, forge, capability, seed=1, split="val")
    assert forged.reward == 0.0 and forged.rollout is None, forged
    assert "answered another request" in (forged.caused or ""), forged.caused
    assert not runner.targets.send_ahead(two, capability, seed=5, split="val", timeout_s=None)  # no child
    scored = run_and_score(runner, two, capability, seed=5, split="val")
    assert scored.rollout.output == "two:5" and scored.infra_error is None
    assert calls(project) == [["one", 0], ["forge", 1], ["two", 5]]  # "two" was run, by a new child


# -- several requests sent ahead at once (Sandboxes.send_all_ahead): each collected by its run,
# each run once; a request queued behind another starts when the answer before it is read


def sent_all(
    runner: AdapterRunner, capability: Path, *rollouts: tuple[Task, int], timeout_s: float | None = None
) -> int:
    return runner.targets.send_all_ahead(capability, list(rollouts), split="val", timeout_s=timeout_s)


def test_requests_sent_ahead_together_are_each_run_once_in_turn_and_collected_by_their_runs(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, two, three = Task(id="one", input=1), Task(id="two", input=2), Task(id="three", input=3)
    run_and_score(runner, one, capability, seed=0, split="val")
    assert sent_all(runner, capability, (two, 1), (three, 2), (one, 3)) == 3
    sandbox = runner.targets._children[str(capability)]
    # the first starts now; those behind it have no deadline until the answer before them is read
    assert [(e[2].queued, e[2].deadline is None) for e in sandbox.ahead] == [
        (False, True),
        (True, True),
        (True, True),
    ]
    assert run_and_score(runner, two, capability, seed=1, split="val").rollout.output == "two:1"
    before = time.monotonic()
    assert run_and_score(runner, three, capability, seed=2, split="val").rollout.output == "three:2"
    assert not sandbox.ahead[0][2].queued and sandbox.ahead[0][2].sent >= before  # started at three's answer
    assert run_and_score(runner, one, capability, seed=3, split="val").rollout.output == "one:3"
    assert calls(project) == [["one", 0], ["two", 1], ["three", 2], ["one", 3]]


def test_a_queued_request_starts_its_deadline_when_the_answer_before_it_is_read(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, two = Task(id="one", input=1), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=30.0)
    assert sent_all(runner, capability, (two, 1), (one, 2), timeout_s=30.0) == 2
    sandbox = runner.targets._children[str(capability)]
    queued = sandbox.ahead[1][2]
    assert queued.queued and queued.deadline is None
    read = time.monotonic()
    run_and_score(runner, two, capability, seed=1, split="val", timeout_s=30.0)
    assert not queued.queued and queued.deadline is not None and queued.deadline >= read + 30.0


def test_a_child_that_dies_mid_batch_charges_the_rollout_it_ran_and_runs_those_behind_it_afresh(
    runner: AdapterRunner, project: Path
) -> None:
    # queued behind the fatal rollout, two and three never ran: neither a failure of the candidate
    # (it did not cause them) nor lost, each run once by a new child; the fatal one is never run again
    capability = project / "capability"
    one, fatal = Task(id="one", input=1), Task(id="fatal", input="exit")
    two, three = Task(id="two", input=2), Task(id="three", input=3)
    run_and_score(runner, one, capability, seed=0, split="val")
    assert sent_all(runner, capability, (fatal, 1), (two, 2), (three, 3)) == 3
    lost = run_and_score(runner, fatal, capability, seed=1, split="val")
    assert lost.reward == 0.0 and "exit code 3" in (lost.caused or ""), lost
    for task, seed in ((two, 2), (three, 3)):
        scored = run_and_score(runner, task, capability, seed=seed, split="val")
        assert scored.rollout.output == f"{task.id}:{seed}" and scored.caused is None, scored
    assert calls(project) == [["one", 0], ["fatal", 1], ["two", 2], ["three", 3]]


def wait_for(condition, what: str) -> None:
    """Until ``condition()`` holds (the state a thread of the sandbox reaches), a minute at most."""
    give_up = time.monotonic() + 60.0
    while not condition():
        assert time.monotonic() < give_up, f"never: {what}"
        time.sleep(0.01)


def test_a_death_a_reader_thread_reads_mid_batch_runs_those_behind_it_afresh(
    runner: AdapterRunner, project: Path
) -> None:
    # nobody collects for longer than the watch period: the batch is handed to a reader thread,
    # which reads the death; the rollout that died is the candidate's, the one queued behind it
    # never ran and is run afresh
    capability = project / "capability"
    one, fatal, two = Task(id="one", input=1), Task(id="fatal", input="exit"), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=0.4)
    assert sent_all(runner, capability, (fatal, 1), (two, 2), timeout_s=0.4) == 2
    sandbox = runner.targets._children[str(capability)]
    wait_for(lambda: sandbox.proc is None, "the reader thread reads the child's death")
    lost = run_and_score(runner, fatal, capability, seed=1, split="val", timeout_s=0.4)
    assert lost.reward == 0.0 and "exit code 3" in (lost.caused or ""), lost
    scored = run_and_score(runner, two, capability, seed=2, split="val", timeout_s=0.4)
    assert scored.rollout.output == "two:2" and scored.caused is None, scored
    assert calls(project) == [["one", 0], ["fatal", 1], ["two", 2]]


def test_a_rollout_deaf_to_its_deadline_mid_batch_is_killed_and_the_one_behind_it_runs_afresh(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, deaf, two = Task(id="one", input=1), Task(id="deaf", input="deaf"), Task(id="two", input=2)
    run_and_score(runner, one, capability, seed=0, split="val", timeout_s=0.5)
    assert sent_all(runner, capability, (deaf, 1), (two, 2), timeout_s=0.5) == 2
    late = run_and_score(runner, deaf, capability, seed=1, split="val", timeout_s=0.5)
    assert late.reward == 0.0 and "killed" in (late.caused or ""), late
    scored = run_and_score(runner, two, capability, seed=2, split="val", timeout_s=0.5)
    assert scored.rollout.output == "two:2" and scored.caused is None and scored.infra_error is None
    assert calls(project) == [["one", 0], ["deaf", 1], ["two", 2]]


@pytest.mark.attack(
    "candidate-code",
    attack="candidate code that writes, on its child's pipe and ahead of its own answer, a well-formed "
    "answer (a pass) for a request already sent ahead and queued behind its own (several requests go "
    "to a child at once while rollouts are quick)",
    outcome="prevented: an answer to another request than the one running is refused, read inline or "
    "by a reader thread: the child is killed, the rollout it ran is the candidate's failure (a 0), and "
    "the requests queued behind it are run afresh by a new child, each booked once",
)
def test_an_answer_forged_for_a_request_queued_in_the_same_batch_is_never_taken_for_it(
    runner: AdapterRunner, project: Path
) -> None:
    # the request the candidate forges an answer for is already on the pipe, queued behind its own
    capability = project / "capability"
    one, forge, two = (
        Task(id="one", input=1),
        Task(id="forge", input="forge-and-wait"),
        Task(id="two", input=2),
    )
    run_and_score(runner, one, capability, seed=0, split="val")
    assert sent_all(runner, capability, (forge, 1), (two, 5)) == 2
    forged = run_and_score(runner, forge, capability, seed=1, split="val")
    assert "answered another request" in (forged.caused or ""), forged
    scored = run_and_score(runner, two, capability, seed=5, split="val")
    assert scored.rollout.output == "two:5" and scored.infra_error is None
    assert calls(project) == [["one", 0], ["forge", 1], ["two", 5]]  # "two" was run, by a new child


def test_a_batch_sent_ahead_keeps_within_a_page_of_the_pipe(runner: AdapterRunner, project: Path) -> None:
    # a write ahead never waits on a child busy with a rollout: what it holds unread fits in a page
    capability = project / "capability"
    one = Task(id="one", input=1)
    run_and_score(runner, one, capability, seed=0, split="val")
    # requests of ~1.5 kB each: two fit in a page, a third would not (the first is always sent)
    big = [(Task(id=f"big{i}", input="x" * 1500), i) for i in range(4)]
    assert sent_all(runner, capability, *big) == 2
    sandbox = runner.targets._children[str(capability)]
    sizes = [entry[2].size for entry in sandbox.ahead]
    assert sum(sizes) <= AHEAD_BYTES < sum(sizes) + min(sizes)
    for task, seed in big:  # those sent and those not: each run once, in turn
        assert (
            run_and_score(runner, task, capability, seed=seed, split="val").rollout.output
            == f"{task.id}:{seed}"
        )
    assert calls(project) == [["one", 0], *([t.id, k] for t, k in big)]


@pytest.mark.attack(
    "candidate-code",
    attack="candidate code that writes, on its child's pipe and ahead of its own answer, a well-formed "
    "answer (a pass) for a request already sent ahead and queued behind its own (several requests go "
    "to a child at once while rollouts are quick)",
    note="read by a reader thread: nobody collected for longer than the watch period",
)
def test_an_answer_a_reader_thread_reads_for_a_queued_request_is_never_taken_for_it(
    runner: AdapterRunner, project: Path
) -> None:
    capability = project / "capability"
    one, forge, two = (
        Task(id="one", input=1),
        Task(id="forge", input="forge-and-wait"),
        Task(id="two", input=2),
    )
    run_and_score(runner, one, capability, seed=0, split="val")
    assert sent_all(runner, capability, (forge, 1), (two, 5)) == 2
    sandbox = runner.targets._children[str(capability)]
    wait_for(lambda: sandbox.proc is None, "the reader thread refuses the forged answer")
    forged = run_and_score(runner, forge, capability, seed=1, split="val")
    assert "answered another request" in (forged.caused or ""), forged
    scored = run_and_score(runner, two, capability, seed=5, split="val")
    assert scored.rollout.output == "two:5" and scored.caused is None and scored.infra_error is None
    assert calls(project) == [["one", 0], ["forge", 1], ["two", 5]]
