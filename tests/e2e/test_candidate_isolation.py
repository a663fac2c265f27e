"""Candidate code never runs in a process that scores, records or decides (issue 24).

Each attack below is a candidate whose files are a no-op for the agent (the seed's rules) with
a ``tools/reply.py`` that the noisy agent imports in ``run_target`` — code the adapter runs, as
an optimizer would write it. The candidate's code runs in a sandbox child
(``_engine/sandbox.py``); the session scores, records and decides in its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
from pytest_capevolve._items.nodes import rollout_record
from pytest_capevolve._items.plan import RolloutKey
from pytest_capevolve._project.adapter import load_adapter, load_tasks
from pytest_capevolve._project.spec import load_spec

# rewrites the scorer wherever it can reach it: our runner, the adapter's class, any module
REWRITE_SCORER = """

import sys as _sys

from pytest_capevolve import Score as _Score


def _always_one(*args, **kwargs):
    return _Score(reward=1.0, feedback="patched")


for _module in list(_sys.modules.values()):
    for _name in ("AdapterRunner", "NoisyAgentAdapter"):
        _cls = getattr(_module, _name, None)
        if isinstance(_cls, type):
            _cls.score = _always_one
_runner = _sys.modules.get("pytest_capevolve._engine.runner")
if _runner is not None:
    _runner._take_score = lambda scored, task, score: setattr(scored, "reward", 1.0)
"""

# ends its own process the first time it runs (a marker file in the project's observed/ says so)
EXIT_ONCE = """

import os as _os
from pathlib import Path as _Path

_marker = _Path({marker!r})
if not _marker.exists():
    _marker.write_text("exited")
    _os._exit(0)
"""

# a BaseException the adapter's `except Exception` lets through, every time
BASE_EXCEPTION = """

class _Escape(BaseException):
    pass


raise _Escape("out of the adapter's except Exception")
"""

# hangs the first time, deaf to the SIGALRM deadline: only a kill ends it
HANG_ONCE = """

import signal as _signal
import time as _time
from pathlib import Path as _Path

_marker = _Path({marker!r})
if not _marker.exists():
    _marker.write_text("hung")
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {{_signal.SIGALRM}})
    _time.sleep(600)
"""


def without_microcases(project: Path) -> None:
    """The candidates below fail their own microcases (the screen would reject them before any
    rollout); without them the gate session runs their code, which is what is tested here."""
    shutil.rmtree(project / "microcases")


def no_op_candidate(project: Path, name: str, attack: str) -> Path:
    """The seed's bytes (a no-op for the agent) plus ``attack`` at the end of tools/reply.py."""
    candidate = project / "candidates" / name
    shutil.rmtree(candidate, ignore_errors=True)
    shutil.copytree(project / "capability", candidate)
    with (candidate / "tools" / "reply.py").open("a") as handle:
        handle.write(attack)
    return candidate


@pytest.fixture
def noisy(example, projects) -> Path:
    project = example("noisy_agent")
    # one trial, 40 rollouts a tag: what each test asks is the candidate's own records, verdict and
    # exit (a no-op is rejected at one trial as at two), not a power
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.writable(project, "observed")  # where candidate code leaves what the tests read
    return project


# The gates of a candidate's own failures run without null controls: what each test asks is
# that candidate's records, verdict and exit; two copies of the seed paid 160 rollouts no
# assertion reads (the noise floor's tests are test_gate_e2e.py's).
NO_NULLS = ["--capevolve-null", "0"]
VAL_TASKS = 40  # one trial each (:func:`noisy`)


def candidate_records(projects, project: Path, tag: str) -> list[dict]:
    return [r for k, r in projects.rollout_records(project).items() if k[2] == tag]


def verdict(projects, project: Path, tag: str) -> dict:
    return json.loads((projects.run_dir(project) / "verdicts" / f"{tag}.json").read_text())


@pytest.mark.attack(
    "candidate-code",
    attack="candidate code that monkeypatches the adapter's `score` in-process (with and without `-n 2`)",
    outcome=(
        "prevented: candidate code runs in a sandbox child; `score()` runs in the parent, which never "
        "imported it"
    ),
)
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_candidate_code_that_rewrites_the_scorer_changes_no_reward(
    noisy, projects, capevolve, xdist: list[str]
) -> None:
    no_op_candidate(noisy, "rewrite", REWRITE_SCORER)
    result = capevolve(noisy, "rewrite", gate=True, extra=[*xdist, *NO_NULLS])
    records = candidate_records(projects, noisy, "rewrite")
    assert len(records) == VAL_TASKS
    # every reward is the project's scorer's, in the session's process: 1 only for "resolved"
    assert all(r["reward"] == (1.0 if r["output"] == "resolved" else 0.0) for r in records)
    assert not any(r["feedback"] == "patched" for r in records)
    assert verdict(projects, noisy, "rewrite")["decision"] != "accept"
    assert result.ret != 0, result.stdout.str()  # a no-op is never accepted


@pytest.mark.attack(
    "candidate-code",
    attack="`os._exit(0)` in candidate code during a gate (exit 0 with no verdict, before)",
    outcome=(
        "prevented: the rollout is the candidate's failure (a 0, labelled), the child is restarted, "
        "the session reaches its verdict"
    ),
)
@pytest.mark.parametrize("width", ["1", "4"])
def test_candidate_code_that_exits_its_process_loses_one_rollout_not_the_session(
    noisy, projects, capevolve, width: str
) -> None:
    marker = noisy / "observed" / "exited.marker"
    without_microcases(noisy)
    no_op_candidate(noisy, "quitter", EXIT_ONCE.format(marker=str(marker)))
    result = capevolve(noisy, "quitter", gate=True, extra=["--capevolve-concurrency", width, *NO_NULLS])
    assert marker.exists()
    records = candidate_records(projects, noisy, "quitter")
    lost = [r for r in records if r["feedback"].startswith("candidate failure: ")]
    assert len(records) == VAL_TASKS and len(lost) >= 1  # at K = 4 the child's other rollouts go too
    # the candidate's failure (issue 37): a 0 labelled with the death, never missing data
    assert all("sandbox process" in r["feedback"] and r["reward"] == 0.0 for r in lost)
    assert all(
        r["metrics"] == {"candidate_failure": r["feedback"].removeprefix("candidate failure: ")} for r in lost
    )
    assert not [r for r in records if r["infra_error"]]
    assert verdict(projects, noisy, "quitter")["decision"] != "accept"
    # the session ran to its verdict, which the exit decided: no infra error to end it with 12
    assert result.ret == 10, result.stdout.str()
    result.stdout.fnmatch_lines(["*quitter *REJECT*"])


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a `BaseException` raised in flight at `--capevolve-concurrency 4` (a hang, before); a "
        "candidate deaf to its deadline"
    ),
    outcome=(
        "prevented: an infra error (the child's own report: missing data, see [candidate "
        "failures](candidate-failures.md)); a hung child is killed and the rollout is the candidate's "
        "failure"
    ),
)
def test_a_base_exception_from_candidate_code_is_an_infra_error_in_flight(noisy, projects, capevolve) -> None:
    without_microcases(noisy)
    no_op_candidate(noisy, "escape", BASE_EXCEPTION)
    result = capevolve(noisy, "escape", gate=True, extra=["--capevolve-concurrency", "4", *NO_NULLS])
    records = candidate_records(projects, noisy, "escape")
    assert len(records) == VAL_TASKS
    assert all(r["reward"] is None and "_Escape" in r["infra_error"] for r in records)
    assert verdict(projects, noisy, "escape")["decision"] == "indecisive"  # no coverage
    assert result.ret == 12, result.stdout.str()  # incomplete: infra errors (and no hang)
    # the completing command is given with its condition (a new user re-ran it into the same error)
    result.stdout.fnmatch_lines(
        ["*missing; once the cause of the infra errors above is fixed*to complete only those, run:"]
    )


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a `BaseException` raised in flight at `--capevolve-concurrency 4` (a hang, before); a "
        "candidate deaf to its deadline"
    ),
)
def test_a_hung_candidate_deaf_to_its_deadline_is_killed_and_the_session_goes_on(
    noisy, projects, capevolve
) -> None:
    projects.edit_spec(noisy, "rollout_timeout_s: 30", "rollout_timeout_s: 1")
    marker = noisy / "observed" / "hung.marker"
    without_microcases(noisy)
    no_op_candidate(noisy, "deaf", HANG_ONCE.format(marker=str(marker)))
    result = capevolve(noisy, "deaf", gate=True, extra=NO_NULLS)
    assert marker.exists()
    records = candidate_records(projects, noisy, "deaf")
    killed = [r for r in records if r["feedback"].startswith("candidate failure: ")]
    assert len(records) == VAL_TASKS and len(killed) == 1 and killed[0]["reward"] == 0.0
    assert "did not answer" in killed[0]["feedback"] and "killed" in killed[0]["feedback"]
    assert verdict(projects, noisy, "deaf")["decision"] != "accept"
    assert result.ret == 10, result.stdout.str()  # the session went on to its verdict


# -- records are those of an in-process rollout, byte for byte (timings aside) -----------------

RICH = '''

import logging as _logging
import random as _random
from dataclasses import dataclass as _dataclass


@_dataclass
class Reply:
    text: str
    words: tuple


class RichAdapter(ToyCalcAdapter):
    """Seeded answers in a dataclass holding a tuple: the scorer checks both types, so a rollout
    that came back as anything but the values run_target returned would score 0."""

    def run_target(self, task, ctx, *, seed):
        prompt = (Path(ctx) / "prompt.md").read_text()
        rng = _random.Random(f"{seed}:{task.id}:{prompt}")
        guess = task.target if rng.random() < 0.5 else rng.randrange(100)
        print("rolled", task.id)
        _logging.getLogger("agent").warning("guess %s for %s", guess, task.id)
        return Rollout(
            task_id=task.id,
            output=Reply(text=f"answer {guess}", words=("answer", guess)),
            # "answer" again: one object twice, so the rollout's pickle refers back to its memo
            trace={"draw": rng.random(), "pair": (1, 2), "nested": [{"k": (3,)}], "label": "answer"},
            cost_usd=0.001,
            tokens=len(task.id),
        )

    def score(self, task, rollout):
        reply = rollout.output
        ok = isinstance(reply, Reply) and isinstance(reply.words, tuple) and reply.words[1] == task.target
        return Score(reward=1.0 if ok else 0.0, feedback=f"{type(reply).__name__} {reply.words!r}")
'''


class _Planned:
    def __init__(self, content_hash: str) -> None:
        self.content_hash = content_hash


class _Plan:
    run_id = "reference"

    def __init__(self, seed: int, content_hash: str) -> None:
        self.seed = seed
        self._planned = _Planned(content_hash)

    def seed_for(self, trial: int) -> int:
        return self.seed

    def candidate(self, tag: str) -> _Planned:
        return self._planned


class _Context:
    """What :func:`rollout_record` reads of an item's context."""

    def __init__(self, content_hash: str, task: Any, seed: int, spec: Any) -> None:
        self.pool, self.plan, self.spec = {task.id: task}, _Plan(seed, content_hash), spec


def in_process_reference(project: Path, record: dict) -> dict:
    """What today's in-process path (run_target and score in one process) records."""
    spec = load_spec(project)
    adapter = load_adapter(spec.adapter, spec.project_dir)
    task = load_tasks(adapter, spec.adapter)[record["task_id"]]
    scored = run_and_score(
        AdapterRunner(adapter),  # targets: InProcess
        task,
        spec.capability_path,
        seed=record["seed"],
        split="val",
        timeout_s=spec.rollout_timeout_s,
    )
    key = RolloutKey("val", task.id, record["tag"], record["trial"])
    context = _Context(record["candidate_hash"], task, record["seed"], spec)
    reference = rollout_record(scored, key, context)  # type: ignore[arg-type]
    plain = json.loads(reference.dumps())
    plain.pop("seconds")
    plain.pop("run_id")
    return plain


# one process at widths 1 and 8, and -n 2 at width 8 (its workers at width 1 add no path of their own)
@pytest.mark.parametrize(
    "xdist, width",
    [([], "1"), ([], "8"), (["-n", "2"], "8")],
    ids=["in-process-1", "in-process-8", "xdist-8"],
)
def test_isolated_records_are_the_in_process_records(
    example, projects, capevolve, xdist: list[str], width: str
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, RICH, "adapter.py:RichAdapter")
    projects.edit_spec(project, "num_trials: 1", "num_trials: 3")
    result = capevolve(project, extra=[*xdist, "--capevolve-concurrency", width])
    assert result.ret == 0, result.stdout.str()
    records = projects.rollout_records(project)
    assert len(records) == 36
    rewards = [r["reward"] for r in records.values()]
    assert 0.0 in rewards and 1.0 in rewards  # the types survived: some rollouts score 1
    for record in records.values():
        assert record.pop("confinement").startswith(
            ("confined (", "unconfined (")
        )  # its child's label; none in-process
        assert record == in_process_reference(project, record), record["task_id"]


# -- a session ends the sandbox children it started --------------------------------------------

# notes the pid of the process that runs the candidate's code (its sandbox child) on every
# rollout, and again, in exits.txt beside it, when that process runs its exit handlers
NOTE_PID = """

import atexit as _atexit
import os as _os

with open({notes!r}, "a") as _notes:
    _notes.write(f"{{_os.getpid()}}\\n")


def _note_exit():
    with open({notes!r}.replace("child-pids", "exits"), "a") as _exits:
        _exits.write(f"{{_os.getpid()}}\\n")


_atexit.register(_note_exit)
"""


def children_still_alive(pids: set[int]) -> list[int]:
    """Those of ``pids`` that are still this process's children: running, or dead and never
    reaped (a zombie). A child that was ended and waited for has no /proc entry of ours."""
    alive = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone and reaped
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():  # its parent is this process
            alive.append(pid)
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads children from /proc")
def test_an_in_process_session_reaps_the_sandbox_children_it_started(
    noisy, projects, capevolve, pytester
) -> None:
    notes = noisy / "observed" / "child-pids.txt"
    no_op_candidate(noisy, "noted", NOTE_PID.format(notes=str(notes)))
    # a gate session: the microcase screen's `adapter` check runs the candidate in a child, and
    # so do the session's rollouts (two runners, each with a child of its own)
    capevolve(noisy, "noted", gate=True, extra=NO_NULLS)
    gate_pids = {int(line) for line in notes.read_text().split()}
    assert len(gate_pids) >= 2
    assert children_still_alive(gate_pids) == []
    # each ran its exit handlers first (an inspect task's log folder is removed by one)
    exits = notes.with_name("exits.txt")
    assert {int(line) for line in exits.read_text().split()} == gate_pids
    notes.unlink()
    # a plain microcase run of the same candidate: its `adapter` check's child
    result = pytester.runpytest(
        str(noisy / "microcases"),
        "--capevolve-candidate",
        str(noisy / "candidates" / "noted"),
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == 0, result.stdout.str()
    micro_pids = {int(line) for line in notes.read_text().split()}
    assert micro_pids
    assert children_still_alive(micro_pids) == []


# -- what candidate code forks ends with its sandbox child --------------------------------------

# started by the candidate below: holds the test's FIFO open for reading (a reader the test can
# reach), says so, and writes its file only once the test writes to that FIFO
GRANDCHILD = """
import os, select, sys
fifo = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print("holding", flush=True)
select.select([fifo], [], [])
if os.read(fifo, 16):
    with open(sys.argv[2], "w") as late:
        late.write("outlived its rollout")
"""

# the first rollout to get here starts GRANDCHILD in its child's process group, waits until it
# holds the FIFO, notes its pid and returns: the grandchild outlives the rollout
FORK_ONCE = """

import os as _os
import subprocess as _subprocess
import sys as _sys

try:
    _claim = _os.open({pid_file!r} + ".claim", _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY)
except FileExistsError:
    pass
else:
    _grandchild = _subprocess.Popen(
        [_sys.executable, "-c", {script!r}, {fifo!r}, {late!r}],
        stdin=_subprocess.DEVNULL,
        stdout=_subprocess.PIPE,
    )
    _grandchild.stdout.readline()
    with open({pid_file!r}, "w") as _noted:
        _noted.write(str(_grandchild.pid))
    _os.close(_claim)
    _sys.outliving_grandchild = _grandchild  # kept: never waited for, never warned about
"""


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "candidate code that starts a process which outlives its rollout (it could keep running, hold "
        "files, race the next rollout)"
    ),
    outcome="prevented: ending a sandbox child kills its whole process group, what it forked with it",
)
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits for a process not its own (Linux)")
def test_a_process_candidate_code_starts_does_not_outlive_its_sandbox_child(
    noisy, projects, capevolve
) -> None:
    observed = noisy / "observed"
    fifo, late, pid_file = observed / "go.fifo", observed / "late.txt", observed / "grandchild.pid"
    os.mkfifo(fifo)
    without_microcases(noisy)
    code = FORK_ONCE.format(pid_file=str(pid_file), script=GRANDCHILD, fifo=str(fifo), late=str(late))
    no_op_candidate(noisy, "forker", code)
    result = capevolve(noisy, "forker")
    assert result.ret == 0, result.stdout.str()
    pid = int(pid_file.read_text())  # it held the FIFO when its rollout returned
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        pidfd = None  # gone already
    # a grandchild still holding the FIFO is let go now: it writes `late`, unless it was killed
    with contextlib.suppress(OSError):  # ENXIO: nothing holds it; EPIPE: its holder just died
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(writer, b"go")
        finally:
            os.close(writer)
    if pidfd is not None:
        try:  # it ends either way (killed, or let go); the bound only stops a hang
            ended, _, _ = select.select([pidfd], [], [], 300)
        finally:
            os.close(pidfd)
        assert ended, f"the grandchild {pid} is still running after the session"
    assert not late.exists(), late.read_text()
