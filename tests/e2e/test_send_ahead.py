"""At concurrency 1 the next rollout's request is sent ahead (session/perf/fanout.py): its child
runs it while the session scores and persists the last one, and nothing a user or the run dir
sees changes.

Each comparison runs the same project as shipped and with ``-p no:capevolve-ahead``. The
adapter writes down every ``run_target`` call it gets in its child, so a rollout sent ahead and
then thrown away (paid twice) would show.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import _pytest.stepwise
import pytest
from session_outputs import junit_testcases, normalized

# every call the child gets, one line each; '+' tasks print and log; q12 crashes its child
# the first time it runs
CALLS = """
import json, logging, os

class CallsAdapter(ToyCalcAdapter):
    thread_safe = True  # its rollouts may overlap: the next is sent ahead

    def run_target(self, task, ctx, *, seed):
        with open(os.environ["CALLS_LOG"], "a") as out:
            out.write(json.dumps([task.id, seed, os.path.basename(os.path.dirname(ctx))]) + "\\n")
        if "+" in task.input:
            print(f"adding {task.input}")
            logging.getLogger("calls").warning("logged %s", task.input)
        if task.id == "q12" and not os.path.exists(os.environ["CALLS_LOG"] + ".crashed"):
            open(os.environ["CALLS_LOG"] + ".crashed", "w").close()
            os._exit(3)
        return super().run_target(task, ctx, seed=seed)
"""

# q07's items carry an xfail mark that does not run them: they must never be sent ahead
CONFTEST = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("q07["):
            item.add_marker(pytest.mark.xfail(run=False, reason="a user's xfail mark"))
"""


def calls_of(log: Path) -> list[tuple[str, int, str]]:
    """(task, seed, candidate) of every call the adapter got."""
    return [tuple(json.loads(line)) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_sending_ahead_changes_no_output_record_or_call(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch, xdist: list[str]
) -> None:
    pytester.makeconftest(CONFTEST)
    runs = {}
    # names of one length, and no word a traceback of pytest's own frames holds (pytest 8.1 shows them)
    for mode, off in (("sendon", []), ("sendno", ["-p", "no:capevolve-ahead"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, CALLS, "adapter.py:CallsAdapter")
        projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
        projects.edit_spec(project, "num_trials: 1", "num_trials: 2")  # the seed's items in a row
        log = pytester.path / "observed" / f"calls-{mode}.log"
        monkeypatch.setenv("CALLS_LOG", str(log))
        junit = project / "junit.xml"
        args = [*xdist, *off, "-rA", f"--junitxml={junit}", "-o", "junit_logging=all"]
        result = capevolve(project, extra=args)
        assert result.ret == 12, result.stdout.str()  # q07's rollouts are missing (q12's crash is a 0)
        runs[mode] = (result, project, junit, log)
    (ahead, ahead_project, ahead_xml, ahead_log), (off, off_project, off_xml, off_log) = (
        runs["sendon"],
        runs["sendno"],
    )

    # every rollout ran once in its child (q05's crashed one included), none twice, none of q07
    assert sorted(calls_of(ahead_log)) == sorted(calls_of(off_log))
    assert len(calls_of(ahead_log)) == len(set(calls_of(ahead_log))) == 22
    records = projects.rollout_records(ahead_project)
    assert records == projects.rollout_records(off_project) and len(records) == 22
    # the crash is the candidate's failure (issue 37): a 0 labelled with it, never missing data
    crashed = [r for r in records.values() if r["feedback"].startswith("candidate failure: ")]
    assert [r["task_id"] for r in crashed] == ["q12"] and "sandbox process" in crashed[0]["feedback"]
    assert crashed[0]["reward"] == 0.0 and crashed[0]["infra_error"] is None
    assert ahead.parseoutcomes() == off.parseoutcomes()
    # (the command that completes the missing rollouts differs: it repeats each run's own flags)
    ahead_lines = [line for line in normalized(ahead, "sendon") if not line.startswith("  pytest ")]
    off_lines = [line for line in normalized(off, "sendno") if not line.startswith("  pytest ")]
    if xdist:  # lines arrive in another order, and so do the progress line's letters
        progress = re.compile(r"^[.FsxXEI]+ +\[")

        def unordered(lines: list[str]) -> list[str]:
            return sorted(re.sub(r"\[gw\d+\]", "[gw]", x) for x in lines if not progress.match(x))

        assert unordered(ahead_lines) == unordered(off_lines)
        assert sorted(junit_testcases(ahead_xml, "sendon")) == sorted(junit_testcases(off_xml, "sendno"))
    else:
        assert ahead_lines == off_lines
        assert junit_testcases(ahead_xml, "sendon") == junit_testcases(off_xml, "sendno")


# the scorer (in the session's process) of the first rollout scored waits for the child to
# start the next one: it only can if the next request was sent before this one was scored
WAITS = """
import json, os, time

class WaitingAdapter(ToyCalcAdapter):
    thread_safe = True

    def run_target(self, task, ctx, *, seed):
        with open(os.environ["CALLS_LOG"], "a") as out:
            out.write(json.dumps([task.id, seed, os.getpid()]) + "\\n")
        return super().run_target(task, ctx, seed=seed)

    def score(self, task, rollout):
        score = super().score(task, rollout)
        if not os.path.exists(os.environ["CALLS_LOG"] + ".waited"):
            open(os.environ["CALLS_LOG"] + ".waited", "w").close()
            started = 0
            for _ in range(int(os.environ["WAIT_STEPS"])):  # a started child, not a fast one
                with open(os.environ["CALLS_LOG"]) as calls:
                    started = len(calls.read().splitlines())
                if started >= 2:
                    break
                time.sleep(0.05)
            score.metrics = {"next_started_before_this_was_scored": started >= 2}
        return score


class SerialAdapter(WaitingAdapter):
    thread_safe = False  # its rollouts may not overlap: not even a run_target with a score
"""


@pytest.mark.parametrize(
    "adapter, candidates, off, ahead",
    [
        pytest.param("WaitingAdapter", [], [], True, id="ahead"),
        pytest.param("WaitingAdapter", [], ["-p", "no:capevolve-ahead"], False, id="off"),
        # the next item is another candidate's: never sent ahead (code that kills the session
        # while it runs would take the other arm's rollout, not yet persisted, with it)
        pytest.param("WaitingAdapter", ["careful"], [], False, id="another-candidate-next"),
        pytest.param("SerialAdapter", [], [], False, id="not-thread-safe"),
    ],
)
def test_the_next_rollout_runs_while_the_last_is_scored(
    pytester: pytest.Pytester,
    example,
    projects,
    capevolve,
    monkeypatch,
    adapter: str,
    candidates: list[str],
    off: list[str],
    ahead: bool,
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, WAITS, f"adapter.py:{adapter}")
    projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
    monkeypatch.setenv("CALLS_LOG", str(pytester.path / "observed" / "calls.log"))
    # up to 20 s for the next rollout to start; when it cannot, 1 s says so
    monkeypatch.setenv("WAIT_STEPS", "400" if ahead else "20")
    result = capevolve(project, *candidates, extra=off)
    assert result.ret == 0, result.stdout.str()
    waited = [r for r in projects.rollout_records(project).values() if r["metrics"]]
    assert len(waited) == 1
    assert waited[0]["metrics"]["next_started_before_this_was_scored"] is ahead


# the fifth call rewrites its own snapshot's prompt.md with the same bytes (its stamp moves, its
# bytes do not): that rollout is missing data, and only that one
TOUCHES = """
import os, stat
from pathlib import Path

class TouchingAdapter(ToyCalcAdapter):
    thread_safe = True

    def run_target(self, task, ctx, *, seed):
        with open(os.environ["CALLS_LOG"], "a") as out:
            out.write(task.id + "\\n")
        with open(os.environ["CALLS_LOG"]) as calls:
            if len(calls.read().splitlines()) == 5:
                prompt = Path(ctx) / "prompt.md"
                mode, text = stat.S_IMODE(prompt.stat().st_mode), prompt.read_bytes()
                prompt.chmod(0o644)
                prompt.write_bytes(text)
                prompt.chmod(mode)
        return super().run_target(task, ctx, seed=seed)
"""


def test_a_rollout_sent_ahead_that_touches_its_snapshot_voids_itself_not_the_one_before(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    voided = {}
    for mode, off in (("sendon", []), ("sendno", ["-p", "no:capevolve-ahead"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, TOUCHES, "adapter.py:TouchingAdapter")
        projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
        log = pytester.path / "observed" / f"calls-{mode}.log"
        monkeypatch.setenv("CALLS_LOG", str(log))
        result = capevolve(project, extra=off)
        assert result.ret == 12, result.stdout.str()
        fifth = log.read_text().splitlines()[4]
        records = projects.rollout_records(project)
        voided[mode] = sorted(key for key, r in records.items() if r["infra_error"])
        assert [key[1] for key in voided[mode]] == [fifth], (mode, voided[mode])
    assert voided["sendon"] == voided["sendno"]


def test_a_rollout_ceiling_stated_by_the_stop_condition_turns_sending_ahead_off(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    # "at most N rollouts" is a max_metric_calls ceiling as much as the spec's own: a rollout
    # sent ahead and lost (the session stopped) is paid and never counted against it
    project = example("toy_calc")
    projects.add_adapter(project, WAITS, "adapter.py:WaitingAdapter")
    projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
    projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nstop_condition: at most 100 rollouts")
    monkeypatch.setenv("CALLS_LOG", str(pytester.path / "observed" / "calls.log"))
    monkeypatch.setenv("WAIT_STEPS", "20")
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str()
    waited = [r for r in projects.rollout_records(project).values() if r["metrics"]]
    assert len(waited) == 1 and waited[0]["metrics"]["next_started_before_this_was_scored"] is False


# --sw-reset is newer than the oldest pytest this package supports (8.1): asked only where it exists
SW_RESET = "--sw-reset" in inspect.getsource(_pytest.stepwise)


@pytest.mark.parametrize(
    "flag",
    [
        "--sw",
        "--sw-skip",
        pytest.param(
            "--sw-reset", marks=pytest.mark.skipif(not SW_RESET, reason="this pytest has no --sw-reset")
        ),
    ],
)
def test_a_stepwise_session_sends_nothing_ahead_it_will_not_record(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch, flag: str
) -> None:
    # --sw-skip / --sw-reset imply --stepwise only in pytest's own pytest_configure, after
    # ours: a session that stops at a failure must not have paid the next rollout ahead (never
    # recorded, paid again by the re-run)
    project = example("toy_calc")
    projects.add_adapter(project, CALLS, "adapter.py:CallsAdapter")
    projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
    log = pytester.path / "observed" / "calls.log"
    monkeypatch.setenv("CALLS_LOG", str(log))
    # stepwise needs the cache plugin, which the fixture turns off
    args = capevolve.args(project, cache=True)
    result = pytester.runpytest(*args, flag)
    records = projects.rollout_records(project)
    assert 0 < len(records) < 12, result.stdout.str()
    assert len(calls_of(log)) == len(records), result.stdout.str()


# a harness that never said anything about overlap: its agent leaves its answer in one
# workspace, and its scorer reads it there a moment later (as a coding agent's harness runs the
# tests on the repository the agent edited) — at concurrency 1 nothing else ever ran between
SHARED_WORKSPACE = """
import os, time
from dataclasses import replace
from pathlib import Path

class WorkspaceAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        Path(os.environ["WORKSPACE"]).write_text(str(rollout.output))
        return rollout

    def score(self, task, rollout):
        time.sleep(0.05)  # the tests take a moment
        found = int(Path(os.environ["WORKSPACE"]).read_text())
        return super().score(task, replace(rollout, output=found))
"""


def test_an_adapter_that_never_declared_thread_safe_is_not_overlapped(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    runs = {}
    for mode, off in (("sendon", []), ("sendno", ["-p", "no:capevolve-ahead"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, SHARED_WORKSPACE, "adapter.py:WorkspaceAdapter")
        monkeypatch.setenv("WORKSPACE", str(pytester.path / f"workspace-{mode}"))
        capevolve(project, extra=off)
        runs[mode] = {key: r["reward"] for key, r in projects.rollout_records(project).items()}
    assert len(runs["sendon"]) == 12 and runs["sendon"] == runs["sendno"]


def test_a_session_killed_by_the_rollout_sent_ahead_resumes_to_the_same_records(
    example, projects, capevolve, monkeypatch
) -> None:
    # the rollout running ahead kills the session (its parent) while the one before is scored or
    # persisted: that one is lost with it, unrecorded; the resume pays exactly what is missing,
    # and nothing is recorded twice
    from .test_crash_resume import CRASHY

    source = CRASHY + "\n\nclass AheadCrashyAdapter(CrashyAdapter):\n    thread_safe = True\n"
    clean = example("toy_calc", dest="clean")
    projects.add_adapter(clean, source, "adapter.py:AheadCrashyAdapter")
    assert capevolve(clean).ret == 0
    expected = projects.rollout_records(clean)

    project = example("toy_calc", dest="crashy")
    projects.add_adapter(project, source, "adapter.py:AheadCrashyAdapter")
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_AFTER", "5")
    monkeypatch.setenv("CAPEVOLVE_TEST_KILL_WHO", "self")
    crashed = capevolve(project, subprocess=True, timeout=300)
    assert crashed.ret == -9
    events = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    logged = [e for e in map(json.loads, events) if e["kind"] == "rollout"]
    # the 6th, sent ahead, kills the session while the 5th is scored or persisted: the 5th is
    # lost with it or not, as far as the machine's load let this process get (under 4 CPU
    # burners it was persisted in time) — the bound, not the race, is asserted
    assert 0 < len(logged) <= 5

    monkeypatch.delenv("CAPEVOLVE_TEST_KILL_AFTER")
    resumed = capevolve(project)  # kills nothing: in process
    resumed.stdout.fnmatch_lines([f"rollouts: {12 - len(logged)} paid, {len(logged)} reused*"])
    assert projects.rollout_records(project) == expected
    events = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    keys = [
        (e["split"], e["task_id"], e["tag"], e["trial"])
        for e in map(json.loads, events)
        if e["kind"] == "rollout"
    ]
    assert len(keys) == len(set(keys)) == 12


# the scorer takes longer than a rollout may (an LLM judge, a test suite): the rollout sent
# ahead meanwhile answered at once
SLOW_SCORER = """
import time

class SlowScorerAdapter(ToyCalcAdapter):
    thread_safe = True

    def score(self, task, rollout):
        time.sleep(1.2 if task.id in ("q01", "q05") else 0.0)
        return super().score(task, rollout)
"""


def test_a_scorer_slower_than_the_rollout_timeout_makes_no_rollout_sent_ahead_late(
    example, projects, capevolve
) -> None:
    runs = {}
    for mode, off in (("sendon", []), ("sendno", ["-p", "no:capevolve-ahead"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, SLOW_SCORER, "adapter.py:SlowScorerAdapter")
        projects.edit_spec(project, "num_trials: 1", "num_trials: 1\nrollout_timeout_s: 1")
        result = capevolve(project, extra=off)
        assert result.ret == 0, result.stdout.str()
        runs[mode] = projects.rollout_records(project)
    assert not [r["infra_error"] for r in runs["sendon"].values() if r["infra_error"]]
    assert runs["sendon"] == runs["sendno"] and len(runs["sendon"]) == 12


# Ctrl-C, deterministically: the fifth score (in the session's process) sends SIGINT to it, while
# the requests sent ahead behind it are queued in the child or answered and unread
INTERRUPTS = """
import json, os, signal

class InterruptedAdapter(ToyCalcAdapter):
    thread_safe = True

    def run_target(self, task, ctx, *, seed):
        with open(os.environ["CALLS_LOG"], "a") as out:
            out.write(json.dumps([task.id, seed, "seed"]) + "\\n")
        return super().run_target(task, ctx, seed=seed)

    def score(self, task, rollout):
        scored = os.environ["CALLS_LOG"] + ".scored"
        with open(scored, "a") as out:
            out.write(task.id + "\\n")
        with open(scored) as seen:
            if len(seen.read().splitlines()) == 5:
                os.kill(os.getpid(), signal.SIGINT)
        return super().score(task, rollout)
"""


def test_a_session_interrupted_with_requests_sent_ahead_books_each_rollout_once(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    # what was sent ahead and not collected when Ctrl-C came is never booked (nor counted as spent):
    # it stays owed, and the resume pays exactly what is missing, each rollout booked once
    project = example("toy_calc")
    projects.add_adapter(project, INTERRUPTS, "adapter.py:InterruptedAdapter")
    projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
    projects.edit_spec(project, "num_trials: 1", "num_trials: 2")
    log = pytester.path / "observed" / "calls.log"
    monkeypatch.setenv("CALLS_LOG", str(log))
    # in a child process: an in-process run would hand the KeyboardInterrupt to this test
    interrupted = capevolve(project, subprocess=True, timeout=300)
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED, interrupted.stdout.str()

    def booked() -> list[tuple[str, str, str, int]]:
        events = map(json.loads, (projects.run_dir(project) / "events.jsonl").read_text().splitlines())
        return [(e["split"], e["task_id"], e["tag"], e["trial"]) for e in events if e["kind"] == "rollout"]

    first = booked()
    assert 0 < len(first) <= 5 and len(calls_of(log)) >= len(first)
    spent = json.loads((projects.run_dir(project) / "state.json").read_text())["spent"]
    assert spent["metric_calls"] <= len(first)  # what ran ahead unbooked is not spend
    resumed = capevolve(project)  # its scores count on from the fifth: nothing interrupts it
    resumed.stdout.fnmatch_lines([f"rollouts: {24 - len(first)} paid, {len(first)} reused*"])
    keys = booked()
    assert len(keys) == len(set(keys)) == 24


# every rollout costs $0.001; the session's max_usd stops it about halfway
PRICED = """
import json, os

class PricedAdapter(ToyCalcAdapter):
    thread_safe = True  # would be sent ahead, but for the ceiling

    def run_target(self, task, ctx, *, seed):
        with open(os.environ["CALLS_LOG"], "a") as out:
            out.write(json.dumps([task.id, seed, "seed"]) + "\\n")
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.cost_usd = 0.001
        return rollout
"""


def test_a_spend_ceiling_pays_no_rollout_ahead_it_does_not_book(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    # under max_usd nothing is sent ahead: every rollout the agent ran is booked and counted, so the
    # ceiling stops new spend where it would without sending ahead (within one rollout of the cap)
    project = example("toy_calc")
    projects.add_adapter(project, PRICED, "adapter.py:PricedAdapter")
    projects.writable(project, str(pytester.path / "observed"))  # CALLS_LOG's folder
    projects.edit_spec(project, "num_trials: 1", "num_trials: 5\nmax_usd: 0.0305")
    log = pytester.path / "observed" / "calls.log"
    monkeypatch.setenv("CALLS_LOG", str(log))
    result = capevolve(project)
    result.stdout.fnmatch_lines(["*rollouts not started: they would cross max_usd*"])
    records = projects.rollout_records(project)
    spent = json.loads((projects.run_dir(project) / "state.json").read_text())["spent"]
    assert 0 < len(records) < 60 and len(calls_of(log)) == len(records) == spent["metric_calls"]
    assert spent["usd"] <= 0.0305 + 0.001 + 1e-9
