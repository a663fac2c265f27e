"""Two gate sessions on one run at once (issue 25): each decision keeps its own α level.

The α budget of a loop schedule (``lord``, ``basel``) spends a level per decision: the j-th
decision on val gets α_j. Two gate sessions judging at the same moment both read the budget
before either logged its decision, and both decisions were taken at α_1 — had they run one
after the other, the second would have been judged at α_2, and rejected. The replay holds the
first session just before it judges, with its evidence read, runs the second session to its
end in a child process, then lets the first go on: no sleep, no timing — the interleaving is
the test's, not the machine's.
"""

from __future__ import annotations

import json

import pytest
from cli_calls import run

import pytest_capevolve._policy.gate.regate as regate

SIGN = "# Calculator agent\n\nAnswer the arithmetic question with a single integer.\nMind the sign.\n"


def _gate_decisions(run_dir):
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [(e["tag"], e["j"], e["alpha_j"]) for e in events if e["kind"] == "gate_decision"]


@pytest.mark.attack(
    "laundering",
    attack=(
        "two (or more) gate sessions on one run at once under a loop schedule (`addis`, `lord`, "
        "`basel`), each gating another candidate: both decisions were taken at α_1, where in turn the "
        "second would have been judged at α_2 and rejected"
    ),
    outcome=(
        "prevented: a gate reads the α budget, judges and logs its decisions in one hold of the run's "
        "lock; the next session waits, then takes the next level. `capevolve verify` names two "
        "decisions numbered alike, or an α_j not its schedule's; `capevolve gate TAG` re-derives each "
        "at its own level"
    ),
)
def test_a_second_gate_session_judging_at_the_same_time_takes_the_next_level(
    example, projects, capevolve, monkeypatch, capsys
):
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_alpha_schedule: lord")
    # 'careful' fixes the 6 multiplications of val (p = 1/64): accepted at α_1 = 0.0304, not at
    # α_2 = 0.0076; 'sign' fixes its 2 subtractions (p = 1/4): rejected at either
    (project / "candidates" / "sign").mkdir()
    (project / "candidates" / "sign" / "prompt.md").write_text(SIGN)
    second: list[pytest.RunResult] = []
    real = regate.Evidence

    class HeldBeforeJudging(real):  # type: ignore[misc,valid-type]
        """The first session's evidence, read; before it judges, the second session runs whole."""

        @classmethod
        def of_run(cls, *args, **kwargs):
            evidence = real.of_run(*args, **kwargs)
            if not second:
                second.append(capevolve(project, "sign", gate=True, subprocess=True))
            return evidence

    monkeypatch.setattr(
        regate, "Evidence", HeldBeforeJudging
    )  # the session reads it through regate.first_evidence
    first = capevolve(project, "careful", gate=True)
    monkeypatch.undo()
    (other,) = second
    out, other_out = first.stdout.str(), other.stdout.str()
    assert other.ret == 10, other_out
    other.stdout.fnmatch_lines(["sign *REJECT*p = 0.25 > α = 0.0304*"])
    # before: "careful ACCEPT … p = 0.01562 ≤ α = 0.0304", the level 'sign' had just taken
    assert first.ret == 10, out
    first.stdout.fnmatch_lines(["careful *REJECT*p = 0.01562 > α = 0.007599*"])
    run_dir = projects.run_dir(project)
    assert _gate_decisions(run_dir) == [
        ("sign", 1, pytest.approx(0.0303963550927)),
        ("careful", 2, pytest.approx(0.0075990887732)),
    ]
    # the record agrees, and `capevolve gate` re-derives each at the level it was taken at
    code, said, _ = run(capsys, "verify", "--project", str(project))
    assert code == 0, said
    for tag, answer, level in (("careful", "REJECT", "0.007599"), ("sign", "REJECT", "0.0304")):
        code, said, _ = run(capsys, "gate", tag, "--project", str(project))
        assert answer in said and f"α = {level}" in said, said


@pytest.mark.attack(
    "laundering",
    attack=(
        "the same gate session run again on the same rollouts (`--capevolve-commit none`): judged at "
        "the next level while recording the first, so its verdict could flip"
    ),
    outcome=(
        "prevented: a round whose every sibling already took a slot is judged at the level those slots had"
    ),
)
def test_a_gate_session_run_again_judges_at_the_level_its_decision_took(example, projects, capevolve):
    """The same session run a second time (``--capevolve-commit none``, same rollouts) is the
    same decision: it keeps its slot j = 1, and is judged at that slot's level — before, it was
    judged at the next level (α_2) while recording α_1, and read REJECT where it had read ACCEPT."""
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_alpha_schedule: lord")
    for _ in range(2):
        again = capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"])
        assert again.ret == 0, again.stdout.str()
        again.stdout.fnmatch_lines(["careful *ACCEPT*p = 0.01562 ≤ α = 0.0304*"])
    assert _gate_decisions(projects.run_dir(project)) == [("careful", 1, pytest.approx(0.0303963550927))]


@pytest.mark.attack(
    "laundering",
    attack=(
        "a gate session booking a decision while a sequential gate of the same run pays (its α share "
        "was read when it started)"
    ),
    outcome=(
        "prevented: the sequential accept at a share another decision took is `undecided` (basis "
        "`level_taken`), spending nothing; its rejects stand"
    ),
)
def test_a_sequential_accept_at_a_share_another_session_took_is_undecided(
    example, projects, capevolve, monkeypatch
):
    """A sequential gate fixes its α share when it starts (its e-process decides while it
    pays). A gate session that books a decision meanwhile takes that level: the sequential
    gate's accept at it is undecided, spending nothing — before, it was booked an accept at
    α_1 = 0.0304 while the log numbered it decision 2 (α_2 = 0.0076)."""
    import pytest_capevolve._session.sequential_gate as sequential_gate

    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_alpha_schedule: lord")
    (project / "candidates" / "sign").mkdir()
    (project / "candidates" / "sign" / "prompt.md").write_text(SIGN)
    second: list[pytest.RunResult] = []
    real = sequential_gate.Evidence

    class HeldBeforeJudging(real):  # type: ignore[misc,valid-type]
        @classmethod
        def of_run(cls, *args, **kwargs):
            if not second:
                second.append(capevolve(project, "sign", gate=True, subprocess=True))
            return real.of_run(*args, **kwargs)

    monkeypatch.setattr(sequential_gate, "Evidence", HeldBeforeJudging)
    first = capevolve(project, "careful", gate=True, extra=["--capevolve-sequential"])
    monkeypatch.undo()
    assert second[0].ret == 10, second[0].stdout.str()
    out = first.stdout.str()
    assert "booked accept" not in out, out
    first.stdout.fnmatch_lines(["careful *UNDECIDED*another gate session on this run booked 1 decision(s)*"])
    assert [tag for tag, _, _ in _gate_decisions(projects.run_dir(project))] == ["sign"]


FLAKY = '''

class FlakyOnTwo(ToyCalcAdapter):
    """Two multiplications fail as infra errors, for every candidate, while ``flaky`` exists."""

    def run_target(self, task, ctx, *, seed):
        if task.id in ("q01", "q07") and (Path(__file__).parent / "flaky").exists():
            raise RuntimeError("the API is down")
        return super().run_target(task, ctx, seed=seed)
'''


@pytest.mark.attack(
    "laundering",
    attack=(
        "a rejected tag gated again (`--capevolve-commit none`) after its infra-error rollouts were "
        "paid again: judged at its slot's level on more evidence, it reads ACCEPT, then `capevolve "
        "commit --decision accept`"
    ),
    outcome=(
        "refused in one line: an accept is booked only on the first decision the gate logged at the "
        "tag's level against that parent (a grow's later look has its own level)"
    ),
)
def test_a_rejected_tag_gated_again_on_rollouts_paid_since_is_not_booked_an_accept(
    example, projects, capevolve, capsys
):
    """A round gated again keeps its slot's level; the evidence can have grown meanwhile (its
    infra-error rollouts paid again). 'careful' is rejected at α_1 on 10 tasks (p = 1/16); its
    two lost rollouts paid, the same gate would read ACCEPT at α_1 (p = 1/64): the outage failed
    both arms' first draws of those cells, so their new pairs count — a second look at one level,
    which `capevolve commit --decision accept` refuses to book."""
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_alpha_schedule: lord")
    projects.add_adapter(project, FLAKY, "adapter.py:FlakyOnTwo")
    (project / "flaky").write_text("")
    none = ["--capevolve-commit", "none"]
    first = capevolve(project, "careful", gate=True, extra=none)
    first.stdout.fnmatch_lines(["careful *REJECT*p = 0.0625 > α = 0.0304*"])
    (project / "flaky").unlink()
    again = capevolve(project, "careful", gate=True, extra=none)
    # the first decision stands: shown as the REJECT it was, the grown evidence said beside it
    again.stdout.fnmatch_lines(
        ["careful *REJECT*already decided*on the rollouts held now it would read accept*not a decision*"]
    )
    assert again.ret == 10
    code, out, err = run(capsys, "commit", "careful", "--decision", "accept", "--project", str(project))
    assert code != 0, out
    assert "refused" in out + err and "careful" in out + err
    assert _gate_decisions(projects.run_dir(project)) == [("careful", 1, pytest.approx(0.0303963550927))]
