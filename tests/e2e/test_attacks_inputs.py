"""Issue 24, the inputs an adversary controls: each test replays one attack on today's code
and asserts its refusal — one line naming what was wrong, never a traceback, a hang or a
number in a sum.

The adversaries: the optimizer (a coding agent with a shell, which writes candidates and can
edit the run dir) and the candidate's own code, which the adapter runs. Sessions run on a copy
of ``examples/noisy_agent`` cut to one trial (its val split: n01, n02, n10, n13, ...).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main  # numpy and scipy load once, here
from pytest_capevolve._engine.runner import AdapterRunner, run_and_score
from pytest_capevolve._project.adapter import AdapterError, Task, check_cost, check_tokens
from pytest_capevolve._store.rollouts.record import RecordError, RolloutRecord
from pytest_capevolve._store.rundir import RunDir

# val ids of noisy_agent's frozen splits (split_seed 7)
VAL = ("n01", "n02", "n10", "n13")


def noisy(example, projects, adapter_source: str = "", cls: str = "") -> Path:
    """A one-trial copy of noisy_agent, its adapter subclassed by ``adapter_source``."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    if adapter_source:
        projects.add_adapter(project, adapter_source, f"adapter.py:{cls}")
    return project


def strict_json(text: str) -> object:
    """``json.loads`` that refuses NaN and Infinity, as every JSON reader but Python's does."""

    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# -- 1. cost_usd is checked as the reward is -------------------------------------------------

BAD_COST = """

class BadCostAdapter(NoisyAgentAdapter):
    COSTS = {"n01": float("nan"), "n02": -5.0, "n10": float("inf"), "n13": "lots"}

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.cost_usd = self.COSTS.get(task.id, rollout.cost_usd)
        return rollout
"""


@pytest.mark.attack(
    "inputs",
    attack="a cost of NaN, inf or below zero",
    outcome="prevented: an infra error; spend stays valid JSON",
)
def test_bad_costs_are_infra_errors_and_spend_stays_json(example, projects, capevolve, capsys) -> None:
    """Before: NaN cost made ``spend`` print ``NaN`` (not JSON), inf broke the dashboard
    (OverflowError), a negative cost gave spend back, "lots" crashed the item."""
    project = noisy(example, projects, BAD_COST, "BadCostAdapter")
    result = capevolve(project)
    assert result.ret == 12  # infra errors: missing data
    records = projects.rollout_records(project)
    for task_id in VAL:
        record = records[("val", task_id, "seed", 0)]
        assert record["reward"] is None, task_id
        assert record["infra_error"].startswith("invalid cost: "), record["infra_error"]
        assert "\n" not in record["infra_error"]
        assert record["cost_usd"] == 0.0
    assert all(math.isfinite(r["cost_usd"]) and r["cost_usd"] >= 0 for r in records.values())
    capsys.readouterr()
    assert main(["spend", str(project), "--json"]) == 0
    spend = strict_json(capsys.readouterr().out)
    assert spend["spent"]["runner_usd"] == pytest.approx(0.0021 * (len(records) - len(VAL)))
    assert main(["dashboard", str(project)]) == 0


@pytest.mark.attack(
    "inputs",
    attack="a cost of NaN, inf or below zero",
    note="the check",
)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e308, 1e6 + 1, -0.01, "1.0", True, [1]])
def test_check_cost_refuses(value) -> None:
    with pytest.raises(AdapterError, match="cost_usd must be"):
        check_cost(value, "run_target('t')")


@pytest.mark.attack(
    "inputs",
    attack="a cost of NaN, inf or below zero",
    note="the check",
)
def test_check_cost_accepts() -> None:
    assert check_cost(1e6, "x") == 1e6  # the most one rollout may cost
    assert check_cost(None, "x") == 0.0
    assert check_cost(0, "x") == 0.0
    assert check_cost(0.25, "x") == 0.25


BAD_TOKENS = """

class BadTokensAdapter(NoisyAgentAdapter):
    TOKENS = {"n01": -3, "n02": float("nan"), "n10": 2.5, "n13": "many"}

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.tokens = self.TOKENS.get(task.id, rollout.tokens)
        return rollout
"""


@pytest.mark.attack(
    "inputs",
    attack="token counts that are negative, NaN or not integers",
    outcome="prevented: an infra error",
)
def test_bad_token_counts_are_infra_errors_like_a_bad_cost(example, projects, capevolve) -> None:
    """Before: ``int(rollout.tokens or 0)`` booked -3 tokens, truncated 2.5 and raised a
    traceback on NaN and "many". Now each is an infra error (missing data), its tokens 0."""
    project = noisy(example, projects, BAD_TOKENS, "BadTokensAdapter")
    result = capevolve(project)
    assert result.ret == 12
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    records = projects.rollout_records(project)
    for task_id in VAL:
        record = records[("val", task_id, "seed", 0)]
        assert record["reward"] is None, task_id
        assert record["infra_error"].startswith("invalid tokens: "), record["infra_error"]
        assert record["tokens"] == 0
    good = [r for r in records.values() if r["task_id"] not in VAL]
    assert good and all(r["tokens"] == 1400 and r["infra_error"] is None for r in good)


@pytest.mark.attack(
    "inputs",
    attack="token counts that are negative, NaN or not integers",
    note="the check",
)
@pytest.mark.parametrize("value", [-1, float("nan"), 2.5, 3.0, "7", True, None.__class__])
def test_check_tokens_refuses(value) -> None:
    with pytest.raises(AdapterError, match="tokens must be a whole number"):
        check_tokens(value, "run_target('t')")


@pytest.mark.attack(
    "inputs",
    attack="token counts that are negative, NaN or not integers",
    note="the check",
)
def test_check_tokens_accepts() -> None:
    assert check_tokens(None, "x") == 0
    assert check_tokens(0, "x") == 0
    assert check_tokens(1400, "x") == 1400


def _record(**fields) -> str:
    base = RolloutRecord(
        run_id="r", split="val", task_id="t", tag="seed", trial=0, seed=0, candidate_hash="h", reward=1.0
    ).to_json()
    base.update(fields)
    return json.dumps(base)


@pytest.mark.attack(
    "inputs",
    attack="a reward of 7.0 written into a file",
)
@pytest.mark.parametrize(
    "fields",
    [
        {"cost_usd": float("nan")},
        {"cost_usd": float("inf")},
        {"cost_usd": -1.0},
        {"cost_usd": 1e308},  # two of these would sum to an infinite spend
        {"cost_usd": "0.1"},
        {"reward": 7.0},
        {"reward": float("nan")},
        {"reward": -0.5},
        {"reward": "1"},
    ],
    ids=repr,
)
def test_a_record_read_back_with_a_bad_number_is_refused(fields) -> None:
    """Before: a file's reward of 7.0 reached the statistics (INTERNALERROR ValueError), a NaN
    cost went into every spend sum. A RecordError on a file quarantines it (re-paid)."""
    with pytest.raises(RecordError, match=r"rollouts/val/x\.json: (reward|cost_usd) "):
        RolloutRecord.loads(_record(**fields), "rollouts/val/x.json")


@pytest.mark.attack(
    "inputs",
    attack="a reward of 7.0 written into a file",
    outcome="prevented: quarantined and paid again",
)
def test_a_file_edited_to_a_bad_reward_is_quarantined_and_paid_again(example, projects, capevolve) -> None:
    project = noisy(example, projects)
    assert capevolve(project).ret in (0, 1)
    path = RunDir(projects.run_dir(project)).rollout_path("val", "n01", "seed", 0)
    record = json.loads(path.read_text())
    record["reward"], record["cost_usd"] = 7.0, float("nan")
    path.write_text(json.dumps(record))
    # edited in place, no file came or went: the sealed summary would serve and leave the file to
    # its readers (tests/e2e/test_attacks_rollout_bytes.py); a session that reads it (the full path)
    (projects.run_dir(project) / "rollouts.summary.json").unlink()
    result = capevolve(project)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"*{path.name}: reward 7.0 is not a number in [[]0, 1]*quarantined*"])
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 39 reused*"])


# -- 4. an adapter that exits ends one rollout, not the session ------------------------------

EXITING = """

import sys


class ExitingAdapter(NoisyAgentAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "n01":
            sys.exit(3)
        return super().run_target(task, ctx, seed=seed)

    def score(self, task, rollout):
        if task.id == "n02":
            raise SystemExit("scorer gave up")
        return super().score(task, rollout)
"""


@pytest.mark.attack(
    "inputs",
    attack="`SystemExit` raised in `run_target` or `score` (sync and async)",
    outcome=(
        "prevented: one rollout ends, never the session — in `run_target` the candidate's failure (a "
        "0), in `score` an infra error"
    ),
)
def test_system_exit_in_the_adapter_ends_one_rollout_not_the_session(example, projects, capevolve) -> None:
    """Before: ``sys.exit`` in run_target or score ended the whole session."""
    project = noisy(example, projects, EXITING, "ExitingAdapter")
    result = capevolve(project)
    assert result.ret == 12
    records = projects.rollout_records(project)
    assert len([k for k in records if k[0] == "val"]) == 40
    # run_target's exit is the candidate side's own doing: its failure (issue 37), labelled
    exited = records[("val", "n01", "seed", 0)]
    assert exited["reward"] == 0.0 and exited["infra_error"] is None
    assert exited["feedback"] == (
        "candidate failure: run_target raised SystemExit(3): an adapter must not exit the process"
    )
    scored = records[("val", "n02", "seed", 0)]["infra_error"]
    assert scored == "score raised SystemExit('scorer gave up'): an adapter must not exit the process"


class _AsyncExiting:
    async def run_target(self, task, ctx, *, seed):
        raise SystemExit(2)

    def tasks(self, split):
        return []

    def score(self, task, rollout):
        return 1.0


@pytest.mark.attack(
    "inputs",
    attack="`SystemExit` raised in `run_target` or `score` (sync and async)",
)
def test_system_exit_in_an_async_adapter_is_the_candidates_failure(tmp_path: Path) -> None:
    scored = run_and_score(AdapterRunner(_AsyncExiting()), Task(id="t"), tmp_path, seed=0, split="val")
    assert scored.reward == 0.0 and scored.infra_error is None
    assert scored.caused == "run_target raised SystemExit(2): an adapter must not exit the process"


# -- 3. what is not a file in a candidate folder ----------------------------------------------


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe")
    return folder / "pipe"


def _socket(folder: Path) -> Path:
    with contextlib.chdir(folder), socket.socket(socket.AF_UNIX) as server:
        server.bind("sock")  # relative: pytester's folder is longer than AF_UNIX allows
    return folder / "sock"  # closed, the socket file stays


def _device(folder: Path) -> Path:
    (folder / "null").symlink_to("/dev/null")  # a device reached through a link: never read
    return folder / "null"


def _loop(folder: Path) -> Path:
    (folder / "loop1").symlink_to("loop2")
    (folder / "loop2").symlink_to("loop1")
    return folder / "loop1"


NOT_FILES = {
    "fifo": (_fifo, "a named pipe (FIFO), not a capability file"),
    "socket": (_socket, "a socket, not a capability file"),
    "device": (_device, "is a symlink to /dev/null, outside the candidate folder"),
    "symlink-loop": (_loop, "a symlink loop"),
}


@pytest.mark.attack(
    "inputs",
    attack="a FIFO, socket or device inside a candidate folder (today's hang)",
    outcome="refused in one line, never opened",
)
@pytest.mark.parametrize("case", sorted(NOT_FILES))
def test_a_candidate_holding_what_is_not_a_file_is_refused_in_one_line(
    example, projects, capevolve, case: str
) -> None:
    """Before: a FIFO hung the session forever (the content hash opened it to read it); a
    symlink loop ended in INTERNALERROR RuntimeError. Now the tamper screen refuses the
    candidate before anything is paid for it, as it refuses a symlink leaving the folder:
    INDECISIVE, never scored, one line naming the file (exit 11)."""
    project = noisy(example, projects)
    make, expected = NOT_FILES[case]
    culprit = make(project / "candidates" / "copy" / "tools")
    # in a child with a timeout: a regression would hang, not fail, in process
    result = capevolve(project, "copy", subprocess=case == "fifo", timeout=300)
    assert result.ret == 11
    result.stdout.fnmatch_lines([f"copy *INDECISIVE*never scored*refused: {culprit}*{expected}*"])
    assert "refused symlink" not in result.stdout.str()  # a FIFO is not called a symlink
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not [k for k in projects.rollout_records(project) if k[2] == "copy"]
    for entry in ("loop1", "loop2"):  # pytester's clean-up trips on a loop it did not make
        (culprit.parent / entry).unlink(missing_ok=True)


@pytest.mark.attack(
    "inputs",
    attack="a FIFO, socket or device inside a candidate folder (today's hang)",
)
def test_a_device_inside_the_folder_is_refused_without_opening_it(tmp_path: Path) -> None:
    from pytest_capevolve._project.candidate import CandidateError, _check_entry

    with pytest.raises(CandidateError, match="a character device, not a capability file"):
        _check_entry(Path("/dev/null"), Path("/dev"))


# -- 5. a garbled file the run reads: one line naming it and the fix (exit 4) -----------------


def _garble(path: Path, text: bytes) -> None:
    path.write_bytes(text)


GARBLED = {
    "spec-not-utf8": (
        lambda project, run: _garble(
            project / "capevolve.yaml", (project / "capevolve.yaml").read_bytes() + b"# \xff\n"
        ),
        "*capevolve.yaml: not UTF-8 text (byte 0xff at offset *); save the file as UTF-8",
    ),
    "spec-lock": (
        lambda project, run: _garble(run / "spec.lock.yaml", b"num_trials: [1\n"),
        "*spec.lock.yaml: damaged, not the YAML mapping the run froze*start a new run with --capevolve-new-run",
    ),
    "splits-truncated": (
        lambda project, run: _garble(run / "splits.json", (run / "splits.json").read_bytes()[:50]),
        "*splits.json: damaged, not readable JSON (*); restore it, or start a new run*",
    ),
    "candidate-json": (
        lambda project, run: _garble(run / "candidates" / "seed" / "candidate.json", b'{"tag": '),
        "*candidates/seed/candidate.json: damaged, not readable JSON*restore it*",
    ),
    "candidate-json-field": (
        lambda project, run: _garble(run / "candidates" / "seed" / "candidate.json", b'{"tag": "seed"}'),
        "*candidates/seed/candidate.json: damaged, lacks content_hash or source*",
    ),
}


@pytest.mark.attack(
    "inputs",
    attack="a garbled `spec.lock.yaml`, `candidate.json` or verdict file",
    outcome="refused in one line",
)
def test_a_garbled_run_file_is_refused_in_one_line(example, projects, capevolve) -> None:
    """Before: each of these ended in INTERNALERROR (UnicodeDecodeError, yaml ParserError,
    JSONDecodeError, KeyError) with a traceback."""
    project = noisy(example, projects)
    assert capevolve(project).ret in (0, 1)
    run = projects.run_dir(project)
    kept = {
        p: p.read_bytes() for p in [project / "capevolve.yaml", *run.rglob("*.json"), *run.glob("*.yaml")]
    }
    for case, (garble, expected) in GARBLED.items():
        garble(project, run)
        result = capevolve(project)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, case
        result.stderr.fnmatch_lines([f"ERROR: {expected}"])
        assert "Traceback" not in result.stderr.str() + result.stdout.str(), case
        for path, data in kept.items():
            path.write_bytes(data)


@pytest.mark.attack(
    "inputs",
    attack="a garbled `spec.lock.yaml`, `candidate.json` or verdict file",
)
def test_a_garbled_verdict_file_is_refused_in_one_line(tmp_path: Path) -> None:
    from pytest_capevolve._store.files import RunDirError
    from pytest_capevolve._store.rundir import RunDir

    rundir = RunDir(tmp_path / "run")
    (rundir.root / "verdicts").mkdir(parents=True)
    rundir.verdicts.verdict_path("copy").write_text('{"decision": "acc')
    with pytest.raises(
        RunDirError, match=r"verdicts/copy\.json: damaged, not readable JSON .*capevolve gate"
    ):
        rundir.verdicts.verdict("copy")
    with pytest.raises(RunDirError, match=r"verdicts/copy\.json: damaged"):
        rundir.verdicts.verdicts()


# -- 2. reserved tag names -----------------------------------------------------------------


@pytest.mark.attack(
    "inputs",
    attack="a real candidate tagged `seed-null1` (or `Seed-Null1`), or `seed` for another folder",
    outcome="refused: null-control names are reserved",
)
def test_a_null_control_name_is_refused_for_a_real_candidate(example, projects, capevolve) -> None:
    """Before: ``--capevolve-tag seed-null1`` was accepted for another candidate's bytes and
    then every gate of the run stopped at "tag 'seed-null1' was evaluated with different bytes"."""
    project = noisy(example, projects)
    result = capevolve(project, "improved", tags=["seed-null1"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: tag 'seed-null1' is reserved: '<tag>-null<i>' names a null control*another --capevolve-tag*"]
    )
    result = capevolve(project, "improved", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret in (0, 1, 10, 11), result.stderr.str()  # the run's gates are not blocked
    assert re.search(r"^improved +(ACCEPT|REJECT) ", result.stdout.str(), re.M)


@pytest.mark.attack(
    "inputs",
    attack="a real candidate tagged `seed-null1` (or `Seed-Null1`), or `seed` for another folder",
)
def test_seed_for_another_folder_and_case_twins_are_refused(example, projects, capevolve) -> None:
    project = noisy(example, projects)
    result = capevolve(project, "improved", tags=["seed"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the tag 'seed' belongs to the spec's capability_path*--capevolve-tag*"])
    result = capevolve(project, "improved", tags=["Seed"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: tag 'Seed' differs from the run's tag 'seed' only in case*"])


CLI_GARBLED = {
    "spec-lock": ("spec.lock.yaml", b"num_trials: [1\n", "spec.lock.yaml: damaged, not the YAML mapping"),
    "candidate-json": ("candidates/seed/candidate.json", b'{"tag": ', "candidate.json: damaged"),
    "verdict-list": ("verdicts/improved.json", b"[1, 2]\n", "improved.json: damaged, not a JSON object"),
    "splits-val-string": (
        "splits.json",
        None,  # val made a string: the splits are not the frozen ones
        "splits.json: not the splits the run froze",
    ),
}


@pytest.mark.attack(
    "inputs",
    attack="a garbled `spec.lock.yaml`, `candidate.json` or verdict file",
    note="by `capevolve gate` and `commit` too",
)
def test_gate_and_commit_refuse_a_garbled_run_file_in_one_line(example, projects, capevolve, capsys) -> None:
    """Before: ``capevolve gate`` and ``capevolve commit`` read past a garbled ``spec.lock.yaml``
    or ``candidate.json`` (a session refused them), and a verdict file holding a JSON list
    ended in a TypeError traceback."""
    project = noisy(example, projects)
    # no null controls: what is garbled and refused is the run's own files, improved's verdict
    # among them (two copies of the seed paid 80 rollouts no assertion reads)
    no_nulls = ["--capevolve-null", "0"]
    gated = capevolve(project, "improved", gate=True, extra=["--capevolve-commit", "none", *no_nulls])
    assert gated.ret in (0, 10), gated.stdout.str()[-2000:]
    run = projects.run_dir(project)
    for case, (rel, data, expected) in CLI_GARBLED.items():
        path = run / rel
        kept = path.read_bytes()
        if data is None:
            splits = json.loads(kept)
            splits["val"] = splits["val"][0]
            data = json.dumps(splits).encode()
        path.write_bytes(data)
        for words in (
            ["gate", "improved"],
            ["commit", "improved", "--decision", "reject", "--reject-basis", "gate"],
        ):
            capsys.readouterr()
            code = main([*words, "--project", str(project)])
            err = capsys.readouterr().err
            assert code in (2, 4), (case, words, code)
            assert [line for line in err.splitlines() if line.strip()] == [err.strip()], (case, err)
            assert expected in err and "Traceback" not in err, (case, err)
        path.write_bytes(kept)
    assert not [
        e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == "decision"
    ]


@pytest.mark.attack(
    "inputs",
    attack="`spec.lock.yaml` deleted (the run was passed over and everything paid again in a new one)",
    outcome="refused in one line, nothing paid",
)
def test_a_deleted_spec_lock_is_refused_never_a_silent_new_run(
    one_trial_baseline, projects, capevolve
) -> None:
    """Attack 11: with spec.lock.yaml deleted the run was passed over, and the next session
    started a new run and paid everything again. Now refused in one line, nothing paid."""
    project = one_trial_baseline  # a copy of one build per process
    run_dir = projects.run_dir(project)
    (run_dir / "spec.lock.yaml").unlink()
    result = capevolve(project, "improved")
    assert result.ret == 4, result.stdout.str()[-1500:]
    err = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(err) == 1 and "spec.lock.yaml is gone" in err[0] and "--capevolve-new-run" in err[0]
    assert [p.name for p in (project / ".capevolve" / "runs").iterdir()] == [run_dir.name]
    # and the way on works: a new run, said so
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0


NONDETERMINISTIC_TASKS = """
import os
from pytest_capevolve import Rollout, Score, Task

class Adapter:
    def tasks(self, split):
        # every process draws other tasks: an unseeded sample, in effect
        salt = f"p{os.getpid()}"
        return [Task(id=f"{salt}-{i:02d}", input=i, target=i) for i in range(20)]

    def run_target(self, task, ctx, *, seed):
        return Rollout(task_id=task.id, output=task.input)

    def score(self, task, rollout):
        return Score(reward=1.0)
"""


@pytest.mark.attack(
    "inputs",
    attack=(
        "a `tasks()` that gives a worker other tasks than the controller (3,989 lines of `KeyError`, before)"
    ),
    outcome="prevented: that worker's rollouts are infra errors saying why; nothing paid",
)
def test_tasks_that_differ_on_a_worker_are_infra_errors_never_a_traceback(pytester, capevolve) -> None:
    """Attack 11: a tasks() that is not deterministic under -n 2 ended in 3,989 lines of
    KeyError. Now each rollout of that worker is an infra error saying why, nothing paid."""
    project = pytester.path / "proj"
    project.mkdir()
    (project / "adapter.py").write_text(NONDETERMINISTIC_TASKS)
    (project / "capevolve.yaml").write_text(
        "adapter: adapter.py:Adapter\ncapability_path: capability\n"
        "split_train: 0.0\nsplit_val: 1.0\nsplit_test: 0.0\nnum_trials: 1\n"
    )
    (project / "capability").mkdir()
    (project / "capability" / "prompt.md").write_text("hello\n")
    result = capevolve(project, extra=["-n", "2"], subprocess=True)
    out = result.stdout.str() + result.stderr.str()
    assert "KeyError" not in out and "Traceback" not in out and "INTERNALERROR" not in out
    assert "tasks() gave this worker other tasks than the controller" in out
    assert result.ret != 0
    run = next((project / ".capevolve" / "runs").iterdir())
    rewards = [
        e.get("reward")
        for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
        if e["kind"] == "rollout"
    ]
    assert all(reward is None for reward in rewards)  # missing data, never a score
