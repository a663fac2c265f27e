"""The pure parts of the handover (issue 26): a journal's own entries, a bounded diff, the
test-id redactor, the top-level-only handover ignore, and the optimizer's cost line and its
refusals (the end-to-end runs are tests/e2e/test_handover.py)."""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import pytest
from cli_calls import run

from pytest_capevolve._loop.journal import render_journal
from pytest_capevolve._loop.optimizer import reported_cost, run_optimizer
from pytest_capevolve._policy.booking.journal_entry import ENTRY_LIMIT, JOURNAL_MARKER, own_entries
from pytest_capevolve._policy.budget.optimizer_spend import OptimizerSpend, SpendRefused
from pytest_capevolve._project.candidate import bounded, content_hash, handover_ignore


def test_a_journal_carries_only_what_its_own_round_wrote():
    carried = render_journal("c2", "c1", None, [])
    assert carried.rstrip().endswith(JOURNAL_MARKER)
    text = carried.replace("None yet", "### c0: reject vs seed\n\nOLD NOTES") + "## Iteration c2\nmine\n"
    assert own_entries(text) == "## Iteration c2\nmine"
    assert own_entries("no marker: all of it\n") == "no marker: all of it"  # the marker was removed
    long = own_entries(JOURNAL_MARKER + "x" * (ENTRY_LIMIT + 50))
    assert long.startswith("x" * ENTRY_LIMIT) and long.endswith("(cut: 50 characters left out)")


def test_a_bounded_diff_says_it_was_cut():
    diff = "".join(f"+line {i}\n" for i in range(1000))
    cut = bounded(diff, 100)
    assert len(cut) < 200 and cut.splitlines()[-1].startswith("... (diff cut: ")
    assert cut.splitlines()[0] == "+line 0" and bounded("+a\n", 100) == "+a\n"


def test_handover_names_are_left_out_at_the_top_only(tmp_path):
    """PROCESS.md at a capability's top is a handover file; skills/x/PROCESS.md is capability:
    copied into a work copy and hashed (shutil.ignore_patterns dropped it at any depth)."""
    src = tmp_path / "cap"
    (src / "skills" / "x").mkdir(parents=True)
    (src / "prompt.md").write_text("p\n")
    (src / "skills" / "x" / "PROCESS.md").write_text("the skill's own process\n")
    (src / "skills" / "x" / "JOURNAL.md").write_text("the skill's own journal\n")
    digest = content_hash(src)
    (src / "PROCESS.md").write_text("handover\n")
    (src / "JOURNAL.md").write_text("handover\n")
    assert content_hash(src) == digest  # top-level handover files never change the candidate
    shutil.copytree(src, tmp_path / "work", ignore=handover_ignore(src))
    work = tmp_path / "work"
    assert not (work / "PROCESS.md").exists() and not (work / "JOURNAL.md").exists()
    assert (work / "skills" / "x" / "PROCESS.md").is_file() and (
        work / "skills" / "x" / "JOURNAL.md"
    ).is_file()
    assert content_hash(work) == digest


@pytest.mark.attack(
    "loop-memory",
    attack='an optimizer printing its true cost, then a second `{"cost_usd": 0}` line',
    outcome="prevented: the largest cost line counts",
)
@pytest.mark.attack(
    "loop-memory",
    attack="an optimizer that under-reports its cost on every line it prints (or prints none)",
    outcome=(
        "**not prevented**: the proposer's cost is what it reports, the only meter the loop has; a "
        "negative or NaN report is refused (the iteration stays unproposed, its real spend unbooked), "
        "but a plausible lie passes. Meter the proposer where it cannot write (the provider's own "
        "spend limit) and cap the run with `max_metric_calls`"
    ),
)
def test_the_largest_cost_line_is_read_and_nonsense_is_refused(tmp_path):
    out = tmp_path / "optimizer.stdout"
    out.write_text('{"cost_usd": 0.5}\nthinking {not json}\n{"other": 1}\n{"cost_usd": 1.25, "tokens": 30}\n')
    assert reported_cost(out) == {"cost_usd": 1.25, "tokens": 30, "cost_line": 4}
    # a cheating optimizer's second, smaller report never undercuts the first
    out.write_text('{"cost_usd": 2.5, "tokens": 9000}\n{"cost_usd": 0.0, "tokens": 0}\n')
    assert reported_cost(out) == {"cost_usd": 2.5, "tokens": 9000, "cost_line": 1}
    out.write_text("no cost line\n")
    assert reported_cost(out) == {} and reported_cost(tmp_path / "missing") == {}
    for bad, word in (
        ('{"cost_usd": -0.01}', "cost_usd=-0.01 is not a spend"),
        ('{"cost_usd": NaN}', "cost_usd=nan is not a spend"),
        ('{"cost_usd": 2e6}', "cost_usd=2000000.0 is not a spend"),
        ('{"cost_usd": "0.1"}', "cost_usd='0.1' is not a number"),
        ('{"tokens": 1.5}', "tokens=1.5 is not a whole number"),
        ('{"tokens": true}', "tokens=True is not a number"),
    ):
        out.write_text(f"ok\n{bad}\n")
        with pytest.raises(SpendRefused) as refused:
            reported_cost(out)
        message = str(refused.value)
        assert "\n" not in message and word in message and "optimizer.stdout line 2" in message
    for usd in (-1.0, math.nan, math.inf, 1e6 + 1):
        with pytest.raises(SpendRefused):
            OptimizerSpend(usd=usd)


@pytest.mark.attack(
    "laundering",
    attack="an optimizer reporting a negative or NaN cost to give back the budget its rollouts used",
)
def test_commit_refuses_a_nonsense_optimizer_usd_in_one_line(capsys, tmp_path: Path):
    code, _, err = run(
        capsys, "commit", "x", "--project", str(tmp_path), "--decision", "reject", "--optimizer-usd", "nan"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "usd=nan is not a spend" in err, err
    code, _, err = run(
        capsys, "commit", "x", "--project", str(tmp_path), "--decision", "reject", "--optimizer-tokens", "-3"
    )
    assert code == 2 and "tokens=-3 is not a spend" in err, err


def test_process_md_gates_at_the_loops_schedule_unless_the_spec_names_one(tmp_path: Path) -> None:
    """PROCESS.md's gate command is the one that works in an agent's round: no booking by the
    gate (the commit carries the cost), and the loop's α schedule unless the spec names one."""
    from pytest_capevolve._loop.handover_docs import render_process
    from pytest_capevolve._project.spec import load_spec

    project = tmp_path / "p"
    shutil.copytree(
        Path(__file__).parents[2] / "examples" / "toy_calc",
        project,
        ignore=shutil.ignore_patterns(".capevolve", "__pycache__"),
    )
    plain = render_process(load_spec(project), "r1", project / "w", "a1", "seed", "agent")
    # the command works inside `capevolve agent` as printed: through the broker, with no `-o`
    # (the broker refuses one; a run holding work copies gates at the loop's schedule by itself)
    # pasteable, into this run whatever run of the project is the newest by then
    assert f"`capevolve pytest --capevolve-run {project} --capevolve-run-id r1 --capevolve-candidate" in plain
    assert f"`capevolve commit a1 {project} --run-id r1 --decision accept|reject ...`" in plain
    assert "--capevolve-gate --capevolve-commit none`" in plain and " -o " not in plain
    assert "by the `addis` schedule" in plain
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text() + "gate_alpha_schedule: basel\n")
    named = render_process(load_spec(project), "r1", project / "w", "a1", "seed", "agent")
    assert "capevolve_gate_alpha_schedule" not in named and "by the `basel` schedule" in named


def test_a_proposed_rounds_cost_counts_until_its_decision_books_it(tmp_path: Path) -> None:
    """What a hill-climb optimizer reported is spent from the moment it is logged: the ceiling
    checks count it until its decision (which carries it) is booked, then only through it."""
    from pytest_capevolve._policy.budget.optimizer_spend import unbooked_usd
    from pytest_capevolve._store.rundir import RunDir

    rundir = RunDir(tmp_path / "run")
    rundir.root.mkdir()
    log = rundir.log
    log.append_event("hill_climb_iteration", tag="cand_0001", phase="started", parent="seed")
    assert unbooked_usd(rundir) == 0.0
    log.append_event("hill_climb_iteration", tag="cand_0001", phase="proposed", optimizer="ok", cost_usd=0.25)
    log.append_event("hill_climb_iteration", tag="cand_0002", phase="proposed", optimizer="ok", cost_usd=0.5)
    assert unbooked_usd(rundir) == 0.75
    log.append_event("decision", tag="cand_0001", decision="reject", optimizer_usd=0.25)
    assert unbooked_usd(rundir) == 0.5  # cand_0001's now counts through its decision
    log.append_event("hill_climb_iteration", tag="cand_0003", phase="proposed", optimizer="ok", cost_usd=-9.0)
    assert unbooked_usd(rundir) == 0.5  # a negative never gives budget back


def test_an_entry_is_escaped_so_it_forges_no_structure() -> None:
    from pytest_capevolve._policy.booking.journal_entry import escaped

    text = "# h1\n  ### cand_0001: accept\nplain # not a heading\n---\n===\n<h3>x</h3>\nend\rCR\u2028LS\x1b[2K\u202e"
    assert escaped(text).split("\n") == [
        "\\# h1",
        "  \\### cand_0001: accept",
        "plain # not a heading",
        "\\---",
        "\\===",
        "\\<h3>x</h3>",
        "end",
        "CR",
        "LS[U+001B][2K[U+202E]",
    ]


@pytest.mark.attack(
    "loop-memory",
    attack=(
        "hill-climb's optimizer failing on purpose, its last stderr line terminal escapes (cursor up, "
        "erase line) and a green `iter 1: ACCEPT cand_0001 vs seed`: the loop quoted it raw in the line "
        "it prints, so the terminal showed a forged accept"
    ),
    outcome="prevented: its words are quoted with each control character as `[U+001B]`",
)
def test_an_optimizers_last_words_reach_the_terminal_escaped(tmp_path: Path) -> None:
    forged = "\x1b[1A\x1b[2K\x1b[32miter 1: ACCEPT cand_0001 vs seed\x1b[0m"
    argv = [sys.executable, "-c", f"import sys; sys.stderr.write({forged!r} + '\\n'); sys.exit(1)"]
    result = run_optimizer(argv, cwd=tmp_path, timeout=60, folder=tmp_path)
    assert result["exit_code"] == 1 and "\x1b" not in result["outcome"]
    assert (
        "([U+001B][1A[U+001B][2K[U+001B][32miter 1: ACCEPT cand_0001 vs seed[U+001B][0m;" in result["outcome"]
    )
