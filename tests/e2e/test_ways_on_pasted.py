"""Ways on pasted back (issue 38, the traps left by the last session): each refusal's command is run
as printed, and does what the refusal says it does."""

from __future__ import annotations

import json
import shlex
import sys
from glob import escape
from pathlib import Path

import pytest
from cli_calls import hill_climb, run
from fix_list_project import fixing, make_fix_list, split_ids


def _pasted(text: str, after: str) -> list[str]:
    """The ``pytest …`` command printed after ``after`` in ``text`` (to a backquote or the line's end), as
    arguments."""
    command = shlex.split(text.split(after, 1)[1].split("`")[0].splitlines()[0])
    assert command[0] == "pytest", command
    return command[1:]


def test_an_accept_with_no_verdict_names_the_gate_command_that_books_it(
    fix_list_baseline, projects, capevolve, capsys, pytester
):
    project = fix_list_baseline
    fixing(project, "big", split_ids(project, "val")[:5])
    assert capevolve(project, "big").ret == 0  # evaluated, not gated: no verdict

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    # before: "Gate it: capevolve pytest --capevolve-run fixes --capevolve-candidate DIR --capevolve-gate"
    assert code != 0 and "there is no verdict. Gate it: pytest " in err, err
    gated = pytester.runpytest(*_pasted(err, "Gate it: "))
    assert gated.ret == 0, gated.stdout.str()[-3000:]
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "big"


def test_a_second_finalize_names_a_new_run_of_this_project_not_of_the_current_folder(
    toy_calc_baseline, projects, capevolve, pytester
):
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    assert capevolve(project, finalize=True).ret == 0
    first = projects.run_dir(project)

    again = capevolve(project, finalize=True)

    # before: "start a new run (`pytest --capevolve-run . --capevolve-new-run` …": no spec in '.'
    err = again.stderr.str()
    assert again.ret == pytest.ExitCode.USAGE_ERROR and "capevolve hill-climb toy_calc --new-run" in err, err
    new_run = pytester.runpytest(*_pasted(err, "start a new run (`"), "-p", "no:cacheprovider")
    assert new_run.ret == 0, new_run.stdout.str()[-3000:]
    assert projects.run_dir(project) != first  # a new run of that project


def test_a_failed_lines_id_pasted_without_the_spec_or_without_capevolve_says_what_to_type(
    example, projects, capevolve, capsys, pytester
):
    project = example("toy_calc")
    first = capevolve(project)
    failed = next(line.split()[1] for line in first.stdout.lines if line.startswith("FAILED "))
    assert failed.startswith("toy_calc/capevolve.yaml::val::"), failed

    # without its spec's file, in a new run that owes it: that rollout alone is run
    short = failed.split("::", 1)[1]
    picked = capevolve(project, extra=["--capevolve-new-run", short])
    # before: "names no rollout of this session's plan" and every rollout was paid
    assert picked.ret == 12 and "rollouts: 1 paid, 0 reused" in picked.stdout.str(), picked.stdout.str()

    # pasted where no --capevolve-run collects it: why, and what to type (pytest said only "not found")
    plain = pytester.runpytest(failed, "-p", "no:cacheprovider")
    err = plain.stderr.str()
    assert plain.ret == pytest.ExitCode.USAGE_ERROR and "is a rollout of a capevolve run" in err, err
    again = pytester.runpytest(
        *_pasted(err, "only an evaluation session collects: "), "-p", "no:cacheprovider"
    )
    again.stdout.fnmatch_lines([f"capevolve: {escape(failed)} is recorded already, so nothing is run*"])
    diagnose = shlex.split(err.split("`capevolve diagnose ", 1)[1].split("`")[0])
    assert run(capsys, "diagnose", *diagnose)[0] == 0


def test_measure_of_an_older_run_names_the_finalize_of_that_run_not_of_the_newest(
    toy_calc_baseline, projects, capevolve, capsys
):
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    older = projects.run_dir(project)
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    newest = projects.run_dir(project)

    code, out, _ = run(capsys, "measure", str(project), "--run-id", older.name)

    # before: "`capevolve measure --finalize` scores the test split once": no project, and the newest run
    assert code == 0 and "test split sealed" in out, out
    pasted = shlex.split(out.split("test split sealed: this table is val only; `", 1)[1].split("`")[0])
    assert pasted[:2] == ["capevolve", "measure"], pasted
    assert run(capsys, *pasted[1:])[0] == 0
    assert (older / "seal.json").is_file() and not (newest / "seal.json").exists()


def test_a_loops_new_run_note_names_the_finalize_that_keeps_this_runs_best_held_out(
    example, projects, capevolve, capsys, pytester
):
    """The note names the one finalize that scores this run's accepted best held out: after
    ``hill-climb --new-run``, the tutorial's ``pytest --capevolve-finalize .`` scored the new run
    (its best still the seed), and the test tasks, sealed for the project, were spent on that."""
    project = example("toy_calc")  # pytester's folder holds it: '.' is no project
    assert capevolve(project, "careful", gate=True).ret == 0  # a one-shot gate: constant, 'careful' best
    first = projects.run_dir(project)

    code, _, err = hill_climb(capsys, project, "--optimizer", "true {workdir}", "--max-iterations", "1")

    # before: the note named only `capevolve hill-climb … --new-run`, and nothing of this run's best
    assert code == 0 and "this run's best 'careful' stays here" in err, err
    pasted = shlex.split(err.split("score it before finalizing the new run (", 1)[1].split(")")[0])
    assert pasted[0] == "pytest", pasted
    scored = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    assert scored.ret == 0, scored.stdout.str()[-3000:]
    assert json.loads((first / "seal.json").read_text())["best"]["tag"] == "careful"


def test_an_incomplete_loops_way_on_is_its_command_again_with_resume(example, projects, capsys, monkeypatch):
    """An outage during a new run's baseline: the loop stops (exit 3) with the baseline's log and, now, the
    command typed with ``--resume`` (it said no way on; a gate's said ``capevolve hill-climb --resume``,
    which a spec without ``optimizer`` refuses: no --optimizer)."""
    project = example("toy_calc")
    adapter = project / "adapter.py"
    adapter.write_text(
        adapter.read_text().replace(
            "        return Rollout(task_id=task.id, output=answer,",
            "        if __import__('os').environ.get('TOY_OUTAGE'):\n"
            "            return Rollout(task_id=task.id, output=None, error='API down')\n"
            "        return Rollout(task_id=task.id, output=answer,",
        )
    )
    optimizer = f"{sys.executable} optimizer.py {{workdir}} {{prompt}}"
    monkeypatch.setenv("TOY_OUTAGE", "1")

    code, _, err = hill_climb(capsys, project, "--new-run", "--optimizer", optimizer, "--max-iterations", "1")

    assert code == 3 and "capevolve hill-climb: incomplete: the baseline session exited 12" in err, err
    pasted = shlex.split(err.split("once its cause is fixed, ", 1)[1].split(" continues it")[0])
    assert pasted[:3] == ["capevolve", "hill-climb", str(project)] and "--new-run" not in pasted, pasted
    monkeypatch.delenv("TOY_OUTAGE")
    code, out, err = run(capsys, *pasted[1:])
    assert code == 0, err
    assert (
        len(json.loads(out)["iterations"]) == 1
        and len(list((project / ".capevolve" / "runs").iterdir())) == 1
    )


def test_checks_fail_on_a_changed_harness_names_the_new_run_command_that_then_passes(
    toy_calc_baseline, projects, capevolve, capsys, pytester
):
    """`capevolve check` once the adapter changed since the run began: its FAIL line said "start a new run
    (--capevolve-new-run)", a flag `check` does not take; it names the session that starts one."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    adapter = project / "adapter.py"
    adapter.write_text(adapter.read_text() + "\n# the agent, changed\n")

    code, out, _ = run(capsys, "check", str(project))

    assert code == 1 and "FAIL  the harness changed since run " in out, out
    pasted = shlex.split(out.split("start a new run (`", 1)[1].split("`")[0])
    assert pasted[0] == "pytest", pasted
    assert pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider").ret == 0
    code, out, _ = run(capsys, "check", str(project))
    assert code == 0 and "the harness and the seed are the ones it measured" in out, out


SHOUTING = """import random

from pytest_capevolve import Rollout, Score, Task


class Adapter:
    def tasks(self, split):
        words = "apple river stone cloud tiger lemon pearl maple ocean flame grass storm".split()
        return [Task(id=f"w{i:02d}", input=w, target=w.upper()) for i, w in enumerate(words * 2)]

    def run_target(self, task, ctx, *, seed):
        from pathlib import Path

        prompt = (Path(ctx) / "prompt.md").read_text()
        chance = 0.0 if "lowercase" in prompt else 0.85 if "UPPERCASE" in prompt else 0.4
        upper = random.Random(f"{seed}:{task.id}").random() < chance
        return Rollout(output=task.input.upper() if upper else task.input, cost_usd=0.001)

    def score(self, task, rollout):
        return Score(reward=float(rollout.output == task.target), feedback="")
"""


def test_a_screen_kill_on_ceiling_names_the_basis_it_supports(pytester, capsys):
    """A newcomer's project: a screen killed the candidate on `ceiling`; `--reject-basis screen_kill`
    was refused with "Screen it (…)", which, pasted, kills it on `ceiling` again. It names the basis."""
    project = pytester.path / "shouting"
    (project / "capability").mkdir(parents=True)
    (project / "capability" / "prompt.md").write_text("Repeat the word.\n")
    (project / "worse").mkdir()
    (project / "worse" / "prompt.md").write_text("Repeat the word in lowercase.\n")
    (project / "adapter.py").write_text(SHOUTING)
    (project / "capevolve.yaml").write_text("adapter: adapter.py:Adapter\ncapability_path: capability\n")
    session = ["--capevolve-run", str(project), "-p", "no:cacheprovider", "-q"]
    assert pytester.runpytest(*session).ret == 0
    screen = ["--capevolve-candidate", str(project / "worse"), "--capevolve-commit", "none"]
    killed = pytester.runpytest(*session, *screen, "--capevolve-screen", "3")
    killed.stdout.fnmatch_lines(["*screen worse (tier3, * tasks): KILL — ceiling*"])

    code, _, err = run(
        capsys, "commit", "worse", str(project), "--decision", "reject", "--reject-basis", "screen_kill"
    )

    # before: "Screen it (pytest … --capevolve-screen 1) or give the basis the record supports"
    assert code == 2 and "its screen kills: ceiling. Book the ground it was killed on: `" in err, err
    pasted = shlex.split(err.split("killed on: `", 1)[1].split("`")[0])
    code, out, err = run(capsys, *pasted[1:])
    assert code == 0 and json.loads(out)["basis"] == "ceiling", err


OUTAGE = """

class Outage(FixList):
    def run_target(self, task, ctx, *, seed):
        import os

        if task.id in os.environ.get("CAPEVOLVE_TEST_OUTAGE", "").split():  # an API down for these
            return Rollout(task_id=task.id, output=None, error="API down")
        return super().run_target(task, ctx, seed=seed)
"""


def test_an_outage_in_both_arms_leaves_the_decision_to_the_session_that_completes_it(
    example, projects, capevolve, pytester, monkeypatch
):
    """A new user's trap: the outage session booked 'indecisive (coverage)', so the session its line
    said to paste was refused ('already decided'); and that session saw '30 vs 0' infra errors (the
    best's re-paid trials uncounted) and imputed both arms' failed first draws at worst: indecisive."""
    project = make_fix_list(example, projects)
    projects.add_adapter(project, OUTAGE, "adapter.py:Outage")
    assert capevolve(project).ret == 0
    val = split_ids(project, "val")
    fixing(project, "big", val)
    monkeypatch.setenv("CAPEVOLVE_TEST_OUTAGE", " ".join(val[:4]))  # a third of val, in every arm

    outage = capevolve(project, "big", gate=True)

    out = outage.stdout.str()
    assert outage.ret == 12 and "big: nothing booked — coverage" in out, out[-3000:]
    monkeypatch.delenv("CAPEVOLVE_TEST_OUTAGE")
    completed = pytester.runpytest(*_pasted(out, "to complete only those, run:\n  "))
    done = completed.stdout.str()
    assert completed.ret == 0 and "big: booked accept" in done, done[-3000:]
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "big"


def test_runs_says_which_unscored_run_can_no_longer_be_finalized_and_its_pasted_way_on_scores_it(
    toy_calc_baseline, projects, capevolve, capsys, pytester
):
    """A run whose test tasks a newer run scored: ``capevolve runs`` said ``sealed``, as for a run whose
    finalize is still to come, and the finalize the tutorial points to from there was refused
    (TestSealError: the project's test seal)."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    older = projects.run_dir(project)
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    assert (
        capevolve(project, finalize=True).ret == 0
    )  # the newest run: the same split_seed, the same test tasks

    code, out, err = run(capsys, "runs", str(project))

    # before: "sealed" on the older run's row, and no word of why its finalize is refused
    row = next(line for line in out.splitlines() if line.startswith(older.name))
    assert code == 0 and "scored elsewhere" in row, out
    said = out + err
    pasted = shlex.split(said.split(f"{older.name}: its test tasks were scored by run ", 1)[1].split("`")[1])
    assert pasted[0] == "pytest", pasted
    scored = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    assert scored.ret == 0, scored.stdout.str()[-3000:]
    assert json.loads((older / "seal.json").read_text()).get("test_reused"), (older / "seal.json").read_text()
    code, out, _ = run(capsys, "runs", str(project), "--json")
    assert [row["test"] for row in json.loads(out)] == ["scored (reused)", "scored"], out


def test_a_commit_of_a_tag_never_gated_names_its_folder_in_the_gate_that_books_it(
    toy_calc_baseline, projects, capevolve, capsys, pytester
):
    """A newcomer books a candidate by its folder's name before gating it: the refusal's gate command
    said ``--capevolve-candidate DIR``, which pasted is no folder."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project

    code, _, err = run(capsys, "commit", "careful", str(project), "--decision", "accept")

    assert code != 0 and "unknown tag 'careful'" in err, err
    pasted = shlex.split(err.split("evaluated it: ", 1)[1].split(" (which books")[0])
    assert pasted[0] == "pytest" and "DIR" not in pasted and "CANDIDATE_FOLDER" not in pasted, pasted
    gated = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    assert gated.ret == 0, gated.stdout.str()[-3000:]
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "careful"


def test_a_microcase_reject_tried_as_an_accept_names_its_own_basis_to_book(
    example, projects, capevolve, capsys
):
    """A candidate a microcase rejected (`--capevolve-commit none`), tried as an accept: the refusal
    said "Book what it decided (capevolve commit TAG --decision reject --reject-basis gate)", and
    pasted, the ledger and rejected.jsonl said the gate refuted an edit no rollout ever measured.
    The way on names the basis the verdict holds, and pasted, books it."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    upsell = project / "candidates" / "upsell"
    upsell.mkdir()
    (upsell / "prompt.md").write_text(
        (project / "capability" / "prompt.md").read_text() + "RULE:always-upsell\n"
    )
    gated = capevolve(project, "upsell", gate=True, extra=["--capevolve-commit", "none"])
    assert gated.ret == 10 and "micro_test_fail" in gated.stdout.str(), gated.stdout.str()[-2000:]
    # booked by hand as the gate's reject: refused, naming the verdict's own basis
    code, _, err = run(
        capsys, "commit", "upsell", str(project), "--decision", "reject", "--reject-basis", "gate"
    )
    assert code == 2 and "was not refuted by the gate" in err and "--reject-basis micro_test_fail`" in err, (
        err
    )

    code, _, err = run(capsys, "commit", "upsell", str(project), "--decision", "accept")

    assert code == 2 and "--reject-basis micro_test_fail)" in err, err
    pasted = shlex.split(err.split("Book what it decided (", 1)[1].split(")", 1)[0])
    assert pasted[:2] == ["capevolve", "commit"], pasted
    code, out, err = run(capsys, *pasted[1:])  # this run of this project, as printed
    assert code == 0, err
    assert json.loads(out)["basis"] == "micro_test_fail"


def test_a_worker_that_dies_at_start_is_named_with_its_error_not_the_first_line_of_a_traceback(
    example, capevolve, pytester
):
    """A worker that cannot start (an ssh gateway whose chdir holds no copy of the project, here a
    plugin raising on workers) dies with a traceback xdist passes on: each "worker … died" line
    said only "(Traceback (most recent call last):", never the error that names the way on."""
    project = example("toy_calc")
    pytester.makeconftest(
        "import pytest\n"
        "def pytest_configure(config):\n"
        "    if hasattr(config, 'workerinput'):\n"
        "        raise pytest.UsageError('this worker holds no copy: point chdir at one')\n"
    )
    result = capevolve(project, extra=["-n", "1", "--max-worker-restart", "1"])
    assert result.ret == 12, result.stdout.str()[-3000:]
    died = [line for line in result.stdout.lines if line.startswith("worker gw0 died")]
    # the error's class as the traceback names it: pytest.UsageError, or by its module in older pytest (8.1)
    said = "UsageError: this worker holds no copy: point chdir at one); its rollouts are missing"
    assert died in (
        [f"worker gw0 died ({module}.{said}"] for module in ("pytest", "_pytest.config.exceptions")
    ), result.stdout.str()[-3000:]


RAISING_SCORER = """

class RaisingScorer(ToyCalcAdapter):
    def score(self, task, rollout):
        raise KeyError("a bug in the scorer")
"""


def test_a_scorer_that_raised_names_the_new_run_that_measures_its_fix(example, projects, capevolve, pytester):
    """Every rollout an infra error because the scorer raised: the way on was only "once the cause
    is fixed … --capevolve-run-id RUN", which, pasted after mending the scorer, is refused (the
    adapter is harness); the line after it names the new run that measures the mended one."""
    project = example("toy_calc")
    projects.add_adapter(project, RAISING_SCORER, "adapter.py:RaisingScorer")
    first = capevolve(project)
    assert first.ret == 12, first.stdout.str()[-3000:]
    text = first.stdout.str()
    adapter = project / "adapter.py"  # the scorer mended
    adapter.write_text(
        adapter.read_text().replace(
            'raise KeyError("a bug in the scorer")', "return super().score(task, rollout)"
        )
    )
    pinned = pytester.runpytest(*_pasted(text, "to complete only those, run:\n  "))
    assert pinned.ret == 4 and "the harness changed" in pinned.stdout.str() + pinned.stderr.str()
    fixed = pytester.runpytest(*_pasted(text, "measure it in a new run: "))
    assert fixed.ret == 0, fixed.stdout.str()[-3000:]
    assert " infra" not in fixed.stdout.lines[-1]  # every rollout scored, in the new run


def test_a_repeat_commit_in_an_older_run_names_the_repair_of_that_run_in_that_project(
    noop_gated, projects, capevolve, capsys
):
    project = noop_gated  # 'noop' gated (rejected), not booked
    first = projects.run_dir(project)
    assert (
        run(capsys, "commit", "noop", str(project), "--decision", "reject", "--reject-basis", "gate")[0] == 0
    )
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0  # the newest run is now another

    code, _, err = run(capsys, "commit", "noop", str(project), "--run-id", first.name, "--decision", "accept")

    # before: "repair the record with `capevolve commit noop --decision accept --force`": pasted, in
    # the newest run (or from any folder but the project's), "unknown tag 'noop'"
    assert code == 2 and "repair the record with `capevolve commit noop " in err, err
    pasted = shlex.split(err.split("repair the record with `", 1)[1].split("`")[0])
    assert pasted[0] == "capevolve", pasted
    code, _, err = run(capsys, *pasted[1:])
    assert code == 0, err
    decisions = [json.loads(line) for line in (first / "events.jsonl").read_text().splitlines()]
    repair = [e for e in decisions if e.get("kind") == "decision"][-1]
    assert (repair["tag"], repair["decision"], repair["forced"]) == ("noop", "accept", True), repair


def test_capevolve_gate_of_a_tag_whose_session_was_cut_off_says_it_is_no_verdict_and_the_gate_that_judges_it(
    toy_calc_baseline, projects, capevolve, capsys, pytester
):
    """A gate session interrupted before it judged (Ctrl-C, kill -9) leaves the candidate's val rollouts
    incomplete; `capevolve gate TAG` then answered INDECISIVE "paired coverage …: could not judge" (exit
    11), with nothing saying that no session had judged it or how to finish it."""
    project = toy_calc_baseline  # the seed's val rollouts; 'careful' never evaluated
    task = split_ids(project, "val")[0]
    one = capevolve(project, "careful", extra=[f"val::{task}[careful-t0]"])  # one rollout, as if cut off
    assert "rollouts: 1 paid" in one.stdout.str(), one.stdout.str()[-2000:]

    code, out, err = run(capsys, "gate", "careful", str(project))

    assert code == 11 and "INDECISIVE" in out, out + err
    assert "no session has judged 'careful'" in err, err
    pasted = shlex.split(err.split("pays only the missing rollouts and judges it: `", 1)[1].split("`")[0])
    assert pasted[0] == "pytest" and "CANDIDATE_FOLDER" not in pasted, pasted
    gated = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    assert gated.ret == 0 and "reused" in gated.stdout.str(), gated.stdout.str()[-3000:]
    assert run(capsys, "gate", "careful", str(project))[0] == 0


def test_a_printed_commit_pasted_after_a_newer_run_began_books_into_the_run_that_printed_it(
    toy_calc_baseline, projects, capevolve, capsys
):
    """A gate left its decision to `capevolve commit` (`--capevolve-commit none`) and printed the line
    that books it; a newer run of the project began before it was pasted. The line said
    `capevolve commit careful . --decision accept`, which books into the newest run: "unknown tag"."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    first = projects.run_dir(project)
    gated = capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"])
    out = gated.stdout.str()
    assert gated.ret == 0 and "1 decided but not booked: `" in out, out[-3000:]
    pasted = shlex.split(out.split("1 decided but not booked: `", 1)[1].split("`")[0])
    assert capevolve(project, extra=["--capevolve-new-run"]).ret == 0
    assert projects.run_dir(project) != first  # the newest run is now another

    code, out, err = run(capsys, *pasted[1:])

    assert pasted[:3] == ["capevolve", "commit", "careful"] and code == 0, err
    assert json.loads((first / "state.json").read_text())["best_id"] == "careful"
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "seed"


CUT_OFF = "not a null result: nothing was decided — no session has judged 'careful' in run "


def _cut_off_gate(project, capevolve) -> None:
    """'careful' with one val rollout paid and no verdict: what a gate session cut off (Ctrl-C, a kill)
    leaves (a session on one of its items, as the test of `capevolve gate`'s wording does)."""
    task = split_ids(project, "val")[0]
    one = capevolve(project, "careful", extra=[f"val::{task}[careful-t0]"])
    assert "rollouts: 1 paid" in one.stdout.str(), one.stdout.str()[-2000:]


def test_a_gate_cut_off_before_its_verdict_is_no_null_result_and_its_gate_pays_only_whats_missing(
    toy_calc_baseline, projects, capevolve, capsys, pytester
):
    """`measure`, report.md and the dashboard said "null result: no candidate was accepted … no
    improvement to report" for a run whose only gate was cut off: nothing had been decided. They say
    so now, with `capevolve gate`'s wording and way on, which, pasted, judges it."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    _cut_off_gate(project, capevolve)

    code, out, err = run(capsys, "measure", str(project))
    assert run(capsys, "dashboard", str(project))[0] == 0

    assert code == 0 and f"NOTE {CUT_OFF}" in out and "null result: no candidate" not in out, out + err
    rundir = projects.run_dir(project)
    report = (rundir / "report.md").read_text()
    assert "> **not a null result**: nothing was decided — no session has judged 'careful'" in report, report
    dashboard = (rundir / "dashboard.html").read_text()
    assert (
        "not a null result: nothing was decided" in dashboard and "null result: no candidate" not in dashboard
    )
    pasted = shlex.split(out.split("pays only the missing rollouts and judges it: `", 1)[1].split("`")[0])
    assert pasted[0] == "pytest" and "CANDIDATE_FOLDER" not in pasted, pasted
    gated = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    # the seed's 12 and careful's one rollout reused; careful's 11 others and two null controls' paid
    assert gated.ret == 0 and "rollouts: 35 paid, 13 reused" in gated.stdout.str(), gated.stdout.str()[-3000:]
    code, out, _ = run(capsys, "measure", str(project))
    assert code == 0 and "not a null result" not in out and "NOTE selected on val" in out, out


def test_a_candidate_evaluated_without_a_gate_is_no_null_result(toy_calc_baseline, capevolve, capsys):
    """A candidate evaluated on the whole of val without `--capevolve-gate` was judged by no session:
    `measure` said "null result: no candidate was accepted … no improvement to report" (only a gate
    cut off, its val incomplete, was said to be no verdict). It names the candidate and the gate now;
    the seed measured again under a fresh tag (`--capevolve-rerun`) is no candidate and changes nothing."""
    project = toy_calc_baseline
    again = capevolve(project, extra=["--capevolve-rerun"])
    assert again.ret == 0 and "rollouts: 12 paid" in again.stdout.str(), again.stdout.str()[-2000:]
    code, out, err = run(capsys, "measure", str(project))
    assert code == 0 and "null result: no candidate" in out and "not a null result" not in out, out + err

    evaluated = capevolve(project, "careful")
    paid = evaluated.stdout.str()
    assert evaluated.ret == 0 and "rollouts: 12 paid" in paid, paid[-2000:]

    code, out, err = run(capsys, "measure", str(project))

    assert code == 0 and f"NOTE {CUT_OFF}" in out and "null result: no candidate" not in out, out + err
    assert "without --capevolve-gate" in out and "--capevolve-gate`" in out, out


def test_a_finalize_after_a_gate_cut_off_says_no_null_result_and_names_the_gate_in_a_new_run(
    toy_calc_baseline, projects, capevolve, pytester
):
    """The finalize summary said "best is the seed: a null result" and its seal ``null_result: true``
    when a gate had been cut off; the way on is a new run's gate (this one chooses no new best)."""
    project = toy_calc_baseline  # pytester's folder holds it: '.' is no project
    _cut_off_gate(project, capevolve)

    final = capevolve(project, finalize=True)

    out = final.stdout.str()
    assert final.ret == 0 and f"best is the seed, {CUT_OFF}" in out, out[-3000:]
    first = projects.run_dir(project)
    assert json.loads((first / "seal.json").read_text())["null_result"] is False
    pasted = shlex.split(out.split("a gate session in a new run judges it: `", 1)[1].split("`")[0])
    assert pasted[0] == "pytest" and "--capevolve-new-run" in pasted, pasted
    gated = pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider")
    assert gated.ret == 0, gated.stdout.str()[-3000:]
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "careful"


def test_a_gate_that_rejected_keeps_its_null_result(noop_gated, capsys):
    """A true null result: the candidate was gated and rejected; measure says so as before."""
    code, out, _ = run(capsys, "measure", str(noop_gated))
    assert code == 0 and "NOTE null result: no candidate was accepted" in out and "not a null" not in out, out


def test_a_misspelt_candidate_folder_names_the_folders_there_and_the_one_named_runs(
    example, capevolve, pytester
):
    """``--capevolve-candidate candidates/carefu`` said only "no such folder"; it names the folders beside
    it, as typed, and the one named, pasted, is evaluated."""
    project = example("toy_calc")
    typo = project / "candidates" / "carefu"

    refused = capevolve(project, typo)

    err = refused.stderr.str()
    assert (
        refused.ret == pytest.ExitCode.USAGE_ERROR
        and "no such folder; name one of the folders there: " in err
    )
    named = err.split("name one of the folders there: ", 1)[1].split()[0].rstrip(",")
    assert named == shlex.quote(str(project / "candidates" / "careful")), err
    ran = capevolve(project, Path(shlex.split(named)[0]))
    assert ran.ret == 0, ran.stdout.str()[-3000:]
    ran.stdout.fnmatch_lines(["careful *val*"])


def test_a_diagnosis_of_another_split_names_the_session_that_evaluates_that_tag(
    toy_calc_baseline, capevolve, capsys, pytester
):
    """``diagnose careful --compare-split train`` for a tag that is not the best: the refusal said
    ``pytest --capevolve-run PROJECT --capevolve-split train``, which pasted evaluates the best only,
    so the same refusal came back however often it was pasted."""
    project = toy_calc_baseline
    assert capevolve(project, "careful").ret == 0  # evaluated on val, not gated: the best stays 'seed'

    code, _, err = run(capsys, "diagnose", "careful", str(project), "--compare-split", "train")

    assert code == 2 and "no train rollouts" in err, err
    pasted = shlex.split(err.split("evaluate it first (", 1)[1].rsplit(")", 1)[0])
    assert pasted[0] == "pytest", pasted
    assert pytester.runpytest(*pasted[1:], "-p", "no:cacheprovider").ret == 0
    code, out, err = run(capsys, "diagnose", "careful", str(project), "--compare-split", "train")
    assert code == 0, err
    assert json.loads(out)["compare"]["split"] == "train"


def test_a_gate_reject_booked_by_hand_as_a_repeat_or_a_microcase_reject_names_the_gate(
    toy_calc_baseline, capevolve, capsys
):
    """A reject the gate refuted, booked with ``--reject-basis repeat`` (the refusal's list offers it)
    or ``micro_test_fail``: booked, and the ledger said bytes already decided, or a microcase, stopped
    an edit the gate measured and refuted. Refused, naming the basis its verdict holds."""
    project = toy_calc_baseline
    work = project / "candidates" / "noted"
    work.mkdir()
    (work / "prompt.md").write_text((project / "capability" / "prompt.md").read_text() + "\nBe brief.\n")
    assert capevolve(project, "noted", gate=True, extra=["--capevolve-commit", "none"]).ret == 10

    for basis in ("repeat", "micro_test_fail"):
        code, _, err = run(
            capsys, "commit", "noted", str(project), "--decision", "reject", "--reject-basis", basis
        )
        assert code == 2 and f"--reject-basis {basis} is booked from a verdict on that basis" in err, err

    pasted = shlex.split(err.split("book what it decided: `", 1)[1].split("`")[0])
    code, out, err = run(capsys, *pasted[1:])
    assert code == 0, err
    assert json.loads(out)["basis"] == "gate"
