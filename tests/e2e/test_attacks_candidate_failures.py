"""Issue 37, class 3: a candidate chooses which draws count.

With an agent that does not reproduce its draws (every LLM agent: here the first draw of a
rollout is fixed by its task and trial, any later draw is fresh, as an API's is), candidate
code that exits its own sandbox child whenever its answer fails left an infra error — missing
data — that the next session paid again with a fresh draw; a no-op was accepted after 3
sessions. A death, a kill or a timeout of the candidate's child while it runs a rollout is now
the candidate's failure: a reward of 0, labelled, never paid again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main

REDRAWING = '''

class RedrawingAdapter(NoisyAgentAdapter):
    """A coin flip per rollout: the first draw of a (candidate, task, trial) is fixed by the
    task and trial alone (the no-op and the seed draw alike), any later one is fresh. The
    candidate's reply tool closes the ticket, as in the example."""

    def run_target(self, task, ctx, *, seed):
        folder = Path(ctx).name
        drawn = Path(__file__).parent / ".draws" / f"{folder}-{task.id}-{seed}"
        if drawn.exists():
            draw = random.SystemRandom().random()
        else:
            drawn.parent.mkdir(exist_ok=True)
            drawn.touch()
            draw = random.Random(f"{task.id}:{seed}").random()
        output = "resolved" if draw < 0.5 else "escalated"
        reply = self._closing(ctx, task.input["category"])
        return Rollout(task_id=task.id, output=output, trace={"reply": reply}, cost_usd=0.001, tokens=10)
'''

# appended to the candidate's tools/reply.py, which the adapter runs after it drew the answer:
# the answer is a local of run_target, two frames up; a failing one ends the child
QUIT_ON_FAILURE = """

import os as _os
import sys as _sys

_frame = _sys._getframe()
while _frame is not None and "output" not in _frame.f_locals:
    _frame = _frame.f_back
if _frame is not None and _frame.f_locals["output"] == "escalated":
    _os._exit(0)
"""


def _project(example, projects, on_failure: str = QUIT_ON_FAILURE) -> Path:
    """noisy_agent on the redrawing adapter, with a candidate ``quitter``: the seed's tool plus
    ``on_failure`` (what its code does on a failing answer)."""
    project = example("noisy_agent")
    projects.add_adapter(project, REDRAWING, "adapter.py:RedrawingAdapter")
    projects.writable(project, ".draws")  # where the adapter keeps its draws, as a user is told to
    projects.with_tool_code(project, "quitter", on_failure)
    return project


def _gated_as_the_attack_loops(project, projects, capevolve) -> list[dict]:
    """``quitter`` gated 4 times (the attack's loop): not accepted, decided at once with no infra
    error; its 40 rollout records. Without null controls: what is asked is quitter's records and
    verdict, and two copies of the seed only paid 80 rollouts no assertion reads (without nulls
    the gate is no harder to pass, so the replay still fails if the attack works)."""
    no_nulls = ["--capevolve-null", "0"]
    results = [capevolve(project, "quitter", gate=True, extra=no_nulls) for _ in range(4)]  # its loop
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "quitter.json").read_text())
    assert verdict["decision"] != "accept", [r.ret for r in results]
    assert results[0].ret == 10, results[0].stdout.str()[-3000:]  # decided at once: no infra error
    records = [r for k, r in projects.rollout_records(project).items() if k[2] == "quitter"]
    assert len(records) == 40 and not [r for r in records if r["infra_error"]]
    return records


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, candidate code that exits its own sandbox "
        "child whenever its answer fails, so the rollout is missing data a later session pays again "
        "with a fresh draw (a no-op accepted by the 4th session, issue 37)"
    ),
    outcome=(
        "prevented: a death, kill or timeout of the child while it runs the rollout, and `sys.exit` in "
        "`run_target`, are the candidate's failure — reward 0, `candidate failure: …` in the feedback "
        "and metrics, never paid again ([candidate failures](candidate-failures.md))"
    ),
)
def test_a_candidate_that_exits_its_child_on_a_failing_answer_books_those_failures(
    example, projects, capevolve
) -> None:
    project = _project(example, projects)
    records = _gated_as_the_attack_loops(project, projects, capevolve)
    failed = [r for r in records if r["feedback"].startswith("candidate failure: ")]
    assert failed and all(r["reward"] == 0.0 and "sandbox process" in r["feedback"] for r in failed)
    assert all(r["metrics"]["candidate_failure"] in r["feedback"] for r in failed)
    # paid once: each rollout's first draw stands, the later sessions paid nothing again
    events = [
        json.loads(line) for line in (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    ]
    paid = [e for e in events if e["kind"] == "rollout" and e.get("tag") == "quitter"]
    assert len(paid) == 40


FLAKY_FIRST = '''

class FlakyFirstAdapter(NoisyAgentAdapter):
    """The API fails the first call of each rollout of half the val tasks of the candidate with
    the fare-class rule (`improved`: missing data), then answers."""

    def run_target(self, task, ctx, *, seed):
        folder = Path(ctx).name
        tried = Path(__file__).parent / ".tried" / f"{folder}-{task.id}-{seed}"
        if "check-fare-class" in self._rules(ctx) and int(task.id[1:]) % 2 == 0 and not tried.exists():
            tried.parent.mkdir(exist_ok=True)
            tried.touch()
            return Rollout(task_id=task.id, output=None, trace={}, error="API down")
        return super().run_target(task, ctx, seed=seed)
'''


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a gate made indecisive by coverage (its Δ̄ and per-task numbers shown), then the missing "
        "rollouts paid and the tag gated again: two looks at one α (an indecisive verdict did not "
        "spend the decision)"
    ),
    outcome=(
        "prevented: the first indecisive-by-coverage verdict of a tag against a parent that showed a "
        "Δ̄ counts as look 1; the next gate is look 2, at α/2 with no growth allowed (`1/(L−1)` of "
        "look 1's level otherwise), said under the verdict and recorded in "
        "`details.looks.counted_look`; `capevolve gate` re-derives it at that level"
    ),
)
def test_the_first_indecisive_by_coverage_verdict_of_a_tag_is_a_look_that_counts(
    example, projects, capevolve, capsys
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.add_adapter(project, FLAKY_FIRST, "adapter.py:FlakyFirstAdapter")
    projects.writable(project, ".tried")  # where the stand-in API keeps what it failed once
    first = capevolve(project, "improved", gate=True)
    run_dir = projects.run_dir(project)
    looked = json.loads((run_dir / "verdicts" / "improved.json").read_text())
    assert looked["decision"] == "indecisive" and looked["basis"] == "coverage", first.stdout.str()[-2000:]
    assert looked["delta_mean"] is not None  # the optimizer saw the numbers
    assert looked["alpha"] == 0.05

    again = capevolve(project, "improved", gate=True)  # the missing rollouts paid, gated again
    verdict = json.loads((run_dir / "verdicts" / "improved.json").read_text())
    # the second gate decided on full data (its verdict may still be a veto, e.g. of unequal infra errors)
    assert verdict["basis"] != "coverage", again.stdout.str()[-2000:]
    assert verdict["details"]["looks"]["look"] == 2 and verdict["details"]["looks"]["counted_look"] > 0
    assert verdict["alpha"] == 0.025  # look 2 of two: α/2, so the two looks spend α together
    assert any("the second look at 'improved'" in w for w in verdict["warnings"])
    # re-derived from the record (`capevolve gate`), it is the same verdict at the same level
    capsys.readouterr()
    main(["gate", "improved", "--project", str(project), "--json"])
    rederived = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rederived["decision"] == verdict["decision"] and rederived["alpha"] == 0.025
    assert not rederived.get("what_if"), rederived.get("what_if")


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, candidate code that exits its own sandbox "
        "child whenever its answer fails, so the rollout is missing data a later session pays again "
        "with a fresh draw (a no-op accepted by the 4th session, issue 37)"
    ),
    note="confined",
)
@pytest.mark.confined
def test_inside_the_kernel_boundary_a_child_that_exits_on_failure_books_its_failures(
    example, projects, capevolve
) -> None:
    """The same candidate, confined (its child under Landlock), on the example's own adapter:
    every failing answer ends the child, and each is booked as its failure, never missing."""
    project = example("noisy_agent")
    # on the tasks whose id ends in 1 (a child started per exit costs a second or two here)
    on_some = QUIT_ON_FAILURE.replace(
        '== "escalated":', '== "escalated" and _frame.f_locals["task"].id.endswith("1"):'
    )
    projects.with_tool_code(project, "quitter", on_some)
    result = capevolve(project, "quitter", gate=True)
    assert result.ret == 10, result.stdout.str()[-3000:]
    records = {k[1]: r for k, r in projects.rollout_records(project).items() if k[2] == "quitter"}
    assert len(records) == 40 and not [r for r in records.values() if r["infra_error"]]
    failed = {t for t, r in records.items() if r["feedback"].startswith("candidate failure: ")}
    assert failed and all(records[t]["reward"] == 0.0 and records[t]["output"] is None for t in failed)
    # every answer that failed on those tasks ended its child: none of them was scored escalated
    assert not [t for t, r in records.items() if t.endswith("1") and r["output"] == "escalated"]
    assert {t for t in failed if not t.endswith("1")} == set()


# appended to the candidate's tools/reply.py: a failing answer sets the mtime of a file of its own
# snapshot (an owner may, even read-only and inside the kernel boundary), bytes untouched
TOUCH_ON_FAILURE = QUIT_ON_FAILURE.replace(
    "_os._exit(0)", "_os.utime(__file__, ns=(1, _os.stat(__file__).st_mtime_ns + 1))"
)


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, candidate code that sets the mtime of a file "
        "of its own snapshot whenever its answer fails (allowed to its owner, read-only and confined), "
        "so the rollout is missing data (its snapshot changed while it ran) a later session pays again "
        "with a fresh draw (before: its mean printed 1.000 against the seed's 0.400, every gate indecisive "
        "only by the worst-case imputation of those trials)"
    ),
    outcome=(
        "prevented: a snapshot whose stamp changed while a rollout ran is hashed again; bytes still the "
        "registered ones keep the rollout's outcome, never paid again"
    ),
)
def test_a_candidate_that_touches_its_snapshot_on_a_failing_answer_keeps_those_failures(
    example, projects, capevolve
) -> None:
    project = _project(example, projects, TOUCH_ON_FAILURE)
    records = _gated_as_the_attack_loops(project, projects, capevolve)
    assert [r for r in records if r["output"] == "escalated"]  # the attack ran on failing answers


# appended to the candidate's tools/reply.py: a failing answer logs a record whose logger name is
# no text (anything goes inside the child); the scoring process raised replaying it, and the item
# ended with no record at all: a rollout the gate passed over, drawn afresh by the next session
UNREPLAYABLE_ON_FAILURE = QUIT_ON_FAILURE.replace(
    "    _os._exit(0)",
    """    import logging as _logging

    _record = _logging.LogRecord("agent", _logging.WARNING, "reply.py", 1, "retrying", None, None)
    _record.name = 7
    _logging.getLogger().handle(_record)""",
)


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, candidate code that logs, on each failing "
        "answer, a record the scoring process cannot replay (a logger name that is no text): the item "
        "raised, its rollout had no record, and the gate passed over it, drawn afresh by the next "
        "session, confined or not (a no-op accepted by its 2nd session, p = 1.5e-05)"
    ),
    outcome=(
        "prevented: an answer whose output or log records the scoring process cannot replay is the "
        "candidate's failure — reward 0, `candidate failure: …`, never paid again"
    ),
)
def test_a_log_record_the_scorer_cannot_replay_books_the_failing_answer(example, projects, capevolve) -> None:
    project = _project(example, projects, UNREPLAYABLE_ON_FAILURE)
    records = _gated_as_the_attack_loops(project, projects, capevolve)
    failed = [r for r in records if r["feedback"].startswith("candidate failure: ")]
    assert failed and all(r["reward"] == 0.0 and "cannot replay" in r["feedback"] for r in failed)


# appended to the candidate's tools/reply.py: a failing answer's trace holds an int of 5,000
# digits (the adapter's Rollout swapped in the module the adapter runs in, inside the child),
# which the scoring process cannot write as JSON: the item raised and left no record
UNRECORDABLE_ON_FAILURE = QUIT_ON_FAILURE.replace(
    "    _os._exit(0)",
    """    _real = _frame.f_globals.setdefault("_real_rollout", _frame.f_globals["Rollout"])
    _frame.f_globals["Rollout"] = lambda **fields: _real(**{**fields, "trace": {"n": 10**5000}})
elif _frame is not None and "_real_rollout" in _frame.f_globals:
    _frame.f_globals["Rollout"] = _frame.f_globals["_real_rollout"]""",
)


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, candidate code that puts, on each failing "
        "answer, a value in its rollout the scoring process cannot record (an int of 5,000 digits, a "
        "list nested 5,000 deep): its item raised and left no record, which the gate passed over (a "
        "no-op accepted by its first session, 38 of 90 rollouts gone, p = 3.1e-05)"
    ),
    outcome=(
        "prevented: a rollout that cannot be recorded is recorded as an infra error naming why (missing "
        "data: against an accept, imputed as the failure it was), never left without a record"
    ),
)
def test_a_rollout_the_scorer_cannot_record_is_an_infra_error_not_a_vanished_draw(
    example, projects, capevolve
) -> None:
    project = _project(example, projects, UNRECORDABLE_ON_FAILURE)
    first = capevolve(project, "quitter", gate=True)
    records = [r for k, r in projects.rollout_records(project).items() if k[2] == "quitter"]
    assert len(records) == 40, first.stdout.str()[-3000:]  # every rollout has its record
    said = "the rollout could not be recorded: ValueError"
    unrecorded = [r for r in records if (r["infra_error"] or "").startswith(said)]
    assert unrecorded and all(r["reward"] is None for r in unrecorded), first.stdout.str()[-3000:]
    results = [first, *(capevolve(project, "quitter", gate=True) for _ in range(3))]  # the attack's loop
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "quitter.json").read_text())
    assert verdict["decision"] != "accept", [r.ret for r in results]


# a plugin of the session that stands for any way a failing rollout leaves no record (its item
# raised before the record was made, the record lost on its way to the controller): it drops the
# record of each of quitter's failing rollouts before the controller sees it
VANISHER = """
import json

import pytest

from pytest_capevolve._store.rollouts.record import RECORD_PROPERTY


def _failing(name, value):
    return name == RECORD_PROPERTY and json.loads(value)["tag"] == "quitter" and json.loads(value)["reward"] == 0.0


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logreport(report):
    report.user_properties = [(n, v) for n, v in report.user_properties if not _failing(n, v)]
    return (yield)
"""


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "with an agent that does not reproduce its draws, any way a failing rollout of the candidate "
        "leaves no record while its item runs (stood for by a plugin dropping the record of each of "
        "a no-op's failing rollouts): the gate passed over those cells and each next session drew "
        "them afresh, a re-roll (a no-op accepted within the attack's loop of 4 gate sessions)"
    ),
    outcome=(
        "prevented: an owed rollout whose item ran and brought no record is recorded as an infra error "
        "in its place (`the rollout left no record: …`; missing data): the gate weighs it as the error it "
        "stands for, and a later draw of it is a redraw after an error, imputed at worst against an accept"
    ),
)
def test_a_failing_rollout_that_leaves_no_record_counts_as_missing(
    example, projects, capevolve, pytester
) -> None:
    project = _project(example, projects)
    (project / "candidates" / "quitter" / "tools" / "reply.py").write_text(
        (project / "capability" / "tools" / "reply.py").read_text() + "\n# a no-op\n"
    )
    (pytester.path / "vanisher.py").write_text(VANISHER)
    pytester.syspathinsert()
    extra = ["--capevolve-null", "0", "-p", "vanisher"]
    first = capevolve(project, "quitter", gate=True, extra=extra)
    records = [r for k, r in projects.rollout_records(project).items() if k[2] == "quitter"]
    assert len(records) == 40, first.stdout.str()[-3000:]  # every rollout has its record
    vanished = [r for r in records if (r["infra_error"] or "").startswith("the rollout left no record")]
    assert vanished and all(r["reward"] is None for r in vanished), first.stdout.str()[-3000:]
    results = [first, *(capevolve(project, "quitter", gate=True, extra=extra) for _ in range(3))]
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "quitter.json").read_text())
    assert verdict["decision"] != "accept", [r.ret for r in results]
