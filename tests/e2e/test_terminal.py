"""The terminal of a capevolve session: one line per failed rollout, the progress line, Ctrl-C's
resume command and --capevolve-explain."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from cli_calls import run

FAILED_LINE = re.compile(r"^FAILED \S*capevolve\.yaml::(val)::(\S+)\[(\S+)-t(\d+)\] reward (\S+)(?:: (.*))?$")


def test_the_evaluation_guide_first_command_prints_one_line_per_failed_rollout(
    example, projects, capevolve, repo
) -> None:
    """The first command of docs/how-to/run-an-evaluation.md, as written there (-n 2 -q): a failed rollout is one line
    naming split, task, tag and trial with the scorer's whole feedback — no FAILURES section,
    no xdist header, no second copy cut at 50 characters — and the table still shows."""
    page = (repo / "docs" / "how-to" / "run-an-evaluation.md").read_text()
    assert (
        "--capevolve-run . --capevolve-candidate candidates/improved -n 2 -q --capevolve-failures all" in page
    )
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 3")  # the command is the page's; n is not in it
    result = capevolve(project, "improved", extra=["-n", "2", "-q", "--capevolve-failures", "all"])
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.lines
    records = projects.rollout_records(project).values()
    failed = {(r["task_id"], r["tag"], r["trial"]): r for r in records if r["passed"] is False}
    assert len(failed) == result.parseoutcomes()["failed"] > 50

    lines = [m for line in out if (m := FAILED_LINE.match(line))]
    assert len(lines) == len(failed)  # one line each: none missing, none twice
    assert {(m[2], m[3], int(m[4])) for m in lines} == set(failed)
    for match in lines:
        record = failed[(match[2], match[3], int(match[4]))]
        assert float(match[5]) == record["reward"] and match[6] == record["feedback"]
    for task, tag, trial in failed:  # no other line names a failed rollout
        assert sum(f"{task}[{tag}-t{trial}]" in line for line in out) == 1
    text = result.stdout.str()
    assert "[gw0]" not in text and "[gw1]" not in text and "-- Python" not in text
    assert not any(re.fullmatch(r"=+ FAILURES =+", line) for line in out)
    assert "short test summary" not in text
    assert "ticket escalated: customer not helped" in text
    result.stdout.fnmatch_lines(["*capevolve run *", "seed *val*40*3*", "improved *val*40*3*"])
    assert re.search(r"\d+ failed, \d+ passed", out[-1])


def test_failure_lines_default_to_one_per_task_in_a_large_session_and_follow_the_switch(
    example, projects, capevolve
) -> None:
    """--capevolve-failures: the default (auto) lists one failed rollout per task once a session
    has more than 20, and says how many it left out; N lists at most N per task; none lists
    none. The count line and the table are the same whatever the switch."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # still > 20 failed rollouts a session
    shown = {}
    for policy in ("auto", "2", "none"):
        extra = ["-q"] if policy == "auto" else ["-q", "--capevolve-new-run", "--capevolve-failures", policy]
        result = capevolve(project, "improved", extra=extra)
        assert result.ret == 0, result.stdout.str()
        lines = [m for line in result.stdout.lines if (m := FAILED_LINE.match(line))]
        per_task: dict[str, int] = {}
        for m in lines:
            per_task[m[2]] = per_task.get(m[2], 0) + 1
        failed = result.parseoutcomes()["failed"]
        shown[policy] = (len(lines), max(per_task.values(), default=0), failed)
        result.stdout.fnmatch_lines([f"… {failed - len(lines)} more failed rollouts not listed (*"])
        result.stdout.fnmatch_lines(["seed *val*40*2*", "mean, SE: each arm's mean reward*pass^k*"])
    failing_tasks = len(
        {r["task_id"] for r in projects.rollout_records(project).values() if r["passed"] is False}
    )
    assert shown["auto"][:2] == (failing_tasks, 1) and shown["auto"][2] > 20
    assert shown["2"][1] == 2 and failing_tasks < shown["2"][0] <= 2 * failing_tasks
    assert shown["none"][:2] == (0, 0)
    assert shown["auto"][2] == shown["2"][2] == shown["none"][2]  # the count line never changes


@pytest.mark.parametrize("bad", ["0", "some", "-3"])
def test_a_bad_failures_switch_is_a_usage_error_in_one_line(bad, example, capevolve) -> None:
    result = capevolve(example("toy_calc"), extra=["--capevolve-failures", bad])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--capevolve-failures takes all, auto, none or a count per task*"])


def test_a_bug_keeps_its_traceback_while_task_failures_stay_one_line(
    pytester: pytest.Pytester, example, capevolve
) -> None:
    """Only the agent's task failures are folded into one line each: a bug in running a
    rollout item (here: a conftest hook that raises for one item) keeps pytest's full report."""
    project = example("toy_calc")
    pytester.makeconftest(
        "def pytest_runtest_call(item):\n"
        "    if item.name.startswith('q10['):\n"
        "        raise RuntimeError('a bug, not a task failure')\n"
    )
    result = capevolve(project)
    text = result.stdout.str()
    assert "RuntimeError: a bug, not a task failure" in text
    assert any(re.fullmatch(r"=+ FAILURES =+", line) for line in result.stdout.lines)
    folded = [line for line in result.stdout.lines if FAILED_LINE.match(line)]
    assert folded and all("q10[" not in line for line in folded)


def test_progress_line_counts_rollouts_and_budget_left(example, projects, capevolve, capsys) -> None:
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0\n", "base_seed: 0\nmax_metric_calls: 100\n")
    result = capevolve(project, "careful", extra=["--capevolve-progress", "0"])
    assert result.ret == 0, result.stdout.str()
    # toy_calc reports no cost_usd: its $ is unknown, not 0.0000 (read as free)
    result.stdout.fnmatch_lines(["careful *val*12*0  unmetered"])
    assert run(capsys, "runs", str(project))[1].splitlines()[1].endswith(" 24  unmetered  sealed  current")
    progress = [line for line in result.stdout.lines if line.startswith("capevolve progress:")]
    assert len(progress) == 24  # 0 s: after every rollout
    assert progress[0].startswith("capevolve progress: 1/24 rollouts (4%), $0.0000 spent this session")
    assert progress[-1].endswith("budget left: 76 rollouts of max_metric_calls=100")
    quiet = capevolve(example("toy_calc", dest="quiet"), "careful")  # default 30 s: a short run shows none
    assert not [line for line in quiet.stdout.lines if "capevolve progress" in line]
    refused = capevolve(project, extra=["--capevolve-progress", "soon"])
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--capevolve-progress takes seconds*or off, got 'soon'*"])


INTERRUPTING = """
import os as _os
import signal as _signal


class InterruptingAdapter(ToyCalcAdapter):
    def score(self, task, rollout):
        if task.id == "q10" and not Path(__file__).with_name("resumed").exists():
            # Ctrl-C, as a terminal sends it: SIGINT to the session, from score(), which runs
            # in it (run_target runs in a sandbox child, which cannot signal it when confined)
            _os.kill(_os.getpid(), _signal.SIGINT)
        return super().score(task, rollout)
"""


def test_ctrl_c_prints_the_exact_command_that_resumes(pytester, example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, INTERRUPTING, "adapter.py:InterruptingAdapter")
    result = capevolve(project, "careful", extra=["--capevolve-new-run"], subprocess=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*capevolve run *", "seed *val*", "* rollouts are missing*run:", "  pytest *", "interrupted: *"]
    )
    run_id = projects.run_dir(project).name
    command = shlex.split(result.stdout.lines[result.stdout.lines.index(_line_after(result, "run:"))])
    assert command[0] == "pytest" and command[-2:] == ["--capevolve-run-id", run_id]
    assert "--capevolve-new-run" not in command  # it would start yet another run
    paid = len(projects.rollout_records(project))
    assert 0 < paid < 24
    (project / "resumed").write_text("")
    resumed = pytester.runpytest(*command[1:])
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.stdout.fnmatch_lines([f"rollouts: {24 - paid} paid, {paid} reused*"])
    assert projects.run_dir(project).name == run_id and len(projects.rollout_records(project)) == 24


def _line_after(result: pytest.RunResult, marker: str) -> str:
    lines = result.stdout.lines
    at = next(i for i, line in enumerate(lines) if "rollouts are missing" in line and line.endswith(marker))
    return lines[at + 1]


def test_explain_puts_each_verdict_in_plain_words(example, projects, capevolve) -> None:
    """In process: the words are the controller's terminal summary, the same over xdist (the
    terminal's ``-n 2`` case is the evaluation guide's first command, above)."""
    project = example("noisy_agent")
    projects.edit_spec(
        project, "num_trials: 5", "num_trials: 2"
    )  # the same words at any n (Δ̄ ≈ 0.13 detectable at 2)
    result = capevolve(project, "copy", gate=True, extra=["--capevolve-explain"])
    assert result.ret == 10, result.stdout.str()
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "copy.json").read_text())
    result.stdout.fnmatch_lines(
        [
            "in plain words (--capevolve-explain):",
            "seed-null1 (REJECT): a null control — a byte-identical copy of 'seed'*",
            "copy (REJECT)",
            f"  compared: 'copy' against 'seed' on the same 40 val tasks, 2 trial(s) each*"
            f"moved by {verdict['delta_mean']:+.4f}*",
            f"  the test (exact): {verdict['reason']}",
            "  at n = 40 tasks the gate detects a true change of Δ̄ ≈ 0.1* 4 times in 5 (α = 0.05*2 null control(s))",
            "  what it would take: *",
        ]
    )


FLAKY_API = """
class FlakyApiAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if task.id == "q10":
            raise ConnectionError("api down\\nretry later")
        return super().run_target(task, ctx, seed=seed)
"""


def test_an_infra_error_is_one_infra_line_never_a_failed_rollout(example, projects, capevolve) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, FLAKY_API, "adapter.py:FlakyApiAdapter")
    result = capevolve(project)
    assert result.ret == 12  # a rollout is missing
    infra = [line for line in result.stdout.lines if line.startswith("  INFRA ")]
    assert len(infra) == 1 and infra[0].startswith("  INFRA val::q10[seed-t0]: ")
    assert "api down retry later" in infra[0]  # its reason on the one line
    assert not [line for line in result.stdout.lines if FAILED_LINE.match(line) and "q10[" in line]


PRINTING = """

class PrintingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        print(f"working on {task.id} in {Path(ctx).name}")
        if task.id == "q10":
            raise RuntimeError("the adapter's own bug")
        return super().run_target(task, ctx, seed=seed)
"""


def test_failed_rollouts_stay_in_durations_and_show_their_output_with_ra(
    example, projects, capevolve
) -> None:
    """The agent's failures are one line each in place of pytest's FAILURES section, but the
    summaries that list every report (``--durations``) still list them, and ``-rA`` shows what
    each one printed under its line — and what an infra error's rollout printed under its own."""
    project = example("toy_calc")
    projects.add_adapter(project, PRINTING, "adapter.py:PrintingAdapter")
    result = capevolve(project, extra=["-rA", "--durations=0", "--durations-min=0"])
    lines = result.stdout.lines
    failed = [(n, m) for n, line in enumerate(lines) if (m := FAILED_LINE.match(line))]
    assert failed
    for n, match in failed:
        task = match.group(2)
        # its captured stdout right under its line, and nobody else's
        assert re.fullmatch(r"-+ Captured stdout call -+", lines[n + 1]), lines[n : n + 3]
        assert lines[n + 2].startswith(f"working on {task} in ")
    start = next(n for n, line in enumerate(lines) if "slowest durations" in line)
    timed = {line.split()[-1] for line in lines[start:] if re.match(r"^\d+\.\d+s call ", line)}
    for _n, match in failed:
        assert any(name.endswith(f"{match.group(2)}[{match.group(3)}-t{match.group(4)}]") for name in timed)
    assert not any(re.fullmatch(r"=+ FAILURES =+", line) for line in lines)  # still one line each
    # an infra error (the adapter raised): what it printed before, under its own line too
    at = lines.index("INFRA val::q10[seed-t0]")
    assert re.fullmatch(r"-+ Captured stdout call -+", lines[at + 1])
    assert lines[at + 2].startswith("working on q10 in ")
