"""Nothing lost, nothing paid twice: a damaged or edited project or run dir, a swallowed timeout,
odd task ids. Each case names the file and what is wrong; nothing persisted is rewritten."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main  # numpy and scipy load once, here, not in each in-process session


@pytest.mark.parametrize("damage", ["edit", "delete"])
def test_the_best_is_evaluated_from_its_snapshot_whatever_happens_to_its_folder(
    example, projects, capevolve, damage
) -> None:
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True, extra=["--capevolve-null", "0"]).ret == 0
    careful = project / "candidates" / "careful"
    if damage == "edit":
        (careful / "prompt.md").write_text("something else entirely\n")
    else:
        shutil.rmtree(careful)
    result = capevolve(project)  # evaluates the best: careful, from its snapshot
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["careful *val *12 *0.833*", "rollouts: 0 paid, 12 reused*"])
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["best_id"] == "careful"


@pytest.mark.attack(
    "held-before",
    attack="a truncated rollout file; a deleted one",
    outcome="quarantined or logged as vanished, and paid again",
)
def test_a_truncated_rollout_is_quarantined_and_paid_again(
    toy_calc_baseline, projects, capevolve, capsys
) -> None:
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    victim = next(  # a failure: one the dashboard's drill-down reads
        p
        for p in sorted((rundir / "rollouts" / "val").glob("*.json"))
        if json.loads(p.read_text())["reward"] == 0.0
    )
    victim.write_bytes(victim.read_bytes()[:100])
    # cut short in place (no file came or went): a resume trusts the sealed summary, and the
    # commands that read the file name it and go on without it
    assert main(["dashboard", str(project)]) == 0
    err = capsys.readouterr().err
    assert victim.name in err and "quarantine" in err
    moved = list((rundir / "rollouts" / ".quarantine" / "val").glob(f"{victim.name}*"))
    assert len(moved) == 1 and len(moved[0].read_bytes()) == 100  # moved aside, not deleted
    result = capevolve(project)  # the missing rollout is paid again
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    assert json.loads(victim.read_text())["schema"] == 1
    assert main(["verify", str(rundir)]) == 0


def test_a_garbage_line_in_the_event_log_is_named_and_repairable(
    toy_calc_baseline, projects, capevolve, capsys
) -> None:
    project = toy_calc_baseline
    rundir = projects.run_dir(project)
    events = rundir / "events.jsonl"
    lines = len(events.read_text().splitlines())
    with events.open("a") as handle:
        handle.write("garbage {\n")
    result = capevolve(project, "careful")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{events}: line {lines + 1} is not an event*capevolve verify --repair*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert main(["verify", str(rundir)]) == 1
    assert main(["verify", "--repair", str(rundir)]) == 0
    out = capsys.readouterr().out
    assert "moved 1 damaged line(s)" in out
    assert capevolve(project, "careful").ret == 0
    assert main(["verify", str(rundir)]) == 0


def test_a_deleted_state_file_is_rebuilt_from_the_event_log_never_reset(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\nmax_metric_calls: 30")
    assert capevolve(project, "careful", gate=True, extra=["--capevolve-null", "0"]).ret == 0
    rundir = projects.run_dir(project)
    before = json.loads((rundir / "state.json").read_text())
    assert before["best_id"] == "careful" and before["spent"]["metric_calls"] == 24
    (rundir / "state.json").unlink()
    # the budget still holds: 24 spent + 12 owed > 30 (a new candidate: bytes of its own)
    shutil.copytree(project / "candidates" / "careful", project / "candidates" / "careful2")
    (project / "candidates" / "careful2" / "notes.md").write_text("a no-op for the agent\n")
    result = capevolve(project, "careful2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*24 + 12 rollouts > max_metric_calls=30*"])
    after = json.loads((rundir / "state.json").read_text())
    for key in ("best_id", "iterations", "stall", "spent", "budget"):
        assert after[key] == before[key], key
    assert any(
        json.loads(line)["kind"] == "state_rebuilt"
        for line in (rundir / "events.jsonl").read_text().splitlines()
    )


def test_verify_cross_checks_rollout_files_against_their_events(example, projects, capevolve, capsys) -> None:
    project = example("toy_calc")
    assert capevolve(project, "careful").ret == 0
    rundir = projects.run_dir(project)
    assert main(["verify", str(rundir)]) == 0
    failed = next(
        path for path in rollout_files(rundir, "seed") if json.loads(path.read_text())["reward"] == 0.0
    )
    record = json.loads(failed.read_text())
    record["reward"], record["passed"] = 1.0, True
    failed.write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 1
    out = capsys.readouterr().out
    assert failed.name in out and "reward 1.0" in out and "event" in out


INT_IDS = """
class IntIdAdapter(ToyCalcAdapter):
    def tasks(self, split):
        return [Task(id=i, input=t.input, target=t.target) for i, t in enumerate(super().tasks(split))]
"""


def test_whole_number_task_ids_are_read_as_strings_in_check_and_in_a_session(
    example, projects, capevolve, capsys
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, INT_IDS, "adapter.py:IntIdAdapter")
    assert main(["check", str(project)]) == 0
    assert "ok    score is deterministic on a re-score (reward 1 on task '0')" in capsys.readouterr().out
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["rollouts: 12 paid, 0 reused*"])
    splits = json.loads((projects.run_dir(project) / "splits.json").read_text())
    assert all(isinstance(i, str) for part in ("train", "val", "test") for i in splits[part])
    assert {key[1] for key in projects.rollout_records(project)} == set(splits["val"])


INTERRUPTING = """
import os as _os
import signal as _signal


class InterruptingAdapter(ToyCalcAdapter):
    def score(self, task, rollout):
        if task.id == "q10":
            # Ctrl-C, as a terminal sends it: SIGINT to the session, from score(), which runs
            # in it (run_target runs in a sandbox child, which cannot signal it when confined)
            _os.kill(_os.getpid(), _signal.SIGINT)
        return super().score(task, rollout)
"""


def test_ctrl_c_prints_the_summary_and_how_to_resume(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, INTERRUPTING, "adapter.py:InterruptingAdapter")
    result = capevolve(project, subprocess=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*capevolve run *",
            "seed *val*",
            "* rollouts are missing; to complete only those, run:",
            "  pytest *--capevolve-run *--capevolve-run-id *",
            "interrupted: nothing was judged; the command above resumes it, paying only for what is missing",
        ]
    )
    # the command that resumes is printed once (it was twice: as the missing rollouts' and the resume's)
    assert sum(line.startswith("  pytest ") for line in result.stdout.lines) == 1, result.stdout.str()


INTERRUPTED_AT_START = """
import os as _os
import signal as _signal
from pathlib import Path as _Path


class InterruptedAtStart(ToyCalcAdapter):
    def tasks(self, split=None):
        if not _Path(__file__).with_name("resumed").exists():
            # Ctrl-C while the session starts (tasks() is read then, in the session's process)
            _os.kill(_os.getpid(), _signal.SIGINT)
        return super().tasks(split)
"""


def test_ctrl_c_while_the_session_starts_says_so_and_the_command_it_names_runs(
    example, projects, capevolve, pytester
) -> None:
    """pytest exits 2 saying nothing at all for an interrupt before its session starts: a user who pressed
    Ctrl-C in the first second saw an empty screen. One line says nothing was paid and what starts it."""
    project = example("toy_calc")
    projects.add_adapter(project, INTERRUPTED_AT_START, "adapter.py:InterruptedAtStart")
    result = capevolve(project, subprocess=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    said = "capevolve: interrupted while the session started, before any rollout ran; nothing was paid: "
    line = next((line for line in result.stderr.lines if line.startswith(said)), None)
    assert line is not None, result.stdout.str() + result.stderr.str()
    runs = project / ".capevolve" / "runs"
    assert not runs.exists() or not projects.rollout_records(project)  # nothing paid
    (project / "resumed").write_text("")
    again = pytester.runpytest(*shlex.split(line.removeprefix(said).removesuffix(" starts it again"))[1:])
    assert again.ret == 0, again.stdout.str()
    again.stdout.fnmatch_lines(["rollouts: 12 paid, 0 reused*"])


def test_run_dir_files_take_the_umask_mode(example, projects, capevolve) -> None:
    import os
    import stat

    project = example("toy_calc")
    assert capevolve(project).ret == 0
    mask = os.umask(0)
    os.umask(mask)
    rundir = projects.run_dir(project)
    for path in [
        rundir / "state.json",
        rundir / "splits.json",
        *(rundir / "rollouts" / "val").glob("*.json"),
    ]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


SPAWNER = """
import subprocess, sys, time
from pathlib import Path


def spawn(pid_file):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    Path(pid_file).write_text(str(child.pid))
    time.sleep(60)
"""


def test_a_call_microcase_past_its_timeout_leaves_no_child_running(pytester, example, projects) -> None:
    import os
    import time

    project = example("toy_calc")
    (project / "capability" / "spawn.py").write_text(SPAWNER)
    # the call runs confined, as a sandbox child: it writes where the spec lets candidate code write
    pid_file = projects.writable(project, "observed")[0] / "child.pid"
    (project / "microcases").mkdir()
    (project / "microcases" / "spawn.yaml").write_text(
        "id: spawns\ncluster: c\ndescription: d\n"
        f"call: {{function: spawn.py:spawn, args: ['{pid_file}'], timeout_s: 6, expect: {{equals: 1}}}}\n"
    )
    result = pytester.runpytest(str(project / "microcases"), "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no result within timeout_s=6*"])
    pid = int(pid_file.read_text())
    # timeout_s: 6 covers the call process's start-up (~0.3 s quiet, several times that at
    # load 10) before spawn() runs; the reap is waited for well under the child's own 60 s
    give_up = time.monotonic() + 45
    while time.monotonic() < give_up:  # the kill is asynchronous: wait for the kernel to reap it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail(f"the call's child {pid} outlived the microcase's timeout")
