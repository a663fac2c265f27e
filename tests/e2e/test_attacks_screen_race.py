"""A writer racing a gate session's screens (a confined optimizer may write its work copy while the
broker gates it; unconfined, anyone): the bytes every screen judged must be the bytes registered and
run. The leak screen reads a candidate once and registration is held to that read's hash
(tests/e2e/test_leak_guard.py); these replay the other screens against the same race."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from run_log import rollout_files

from pytest_capevolve._session import refusals

SCORER = "def grade(output):\n    return 1.0 if output == 'resolved' else 0.0\n"
LENIENT = "def grade(output):\n    return 1.0\n"


def _project(example, projects) -> Path:
    """noisy_agent whose capability carries its scorer (protected by default), and a candidate
    ``racer``: the seed with the honest scorer, until the race."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    (project / "capability" / "scorer.py").write_text(SCORER)
    racer = project / "candidates" / "racer"
    shutil.copytree(project / "capability", racer)
    with (racer / "prompt.md").open("a") as handle:
        handle.write("\nBe courteous.\n")
    return project


def _refused_unpaid(project: Path, result: pytest.RunResult) -> None:
    runs = project / ".capevolve" / "runs"
    assert not [
        r for run in runs.glob("*") for s in ("val", "train") for r in rollout_files(run, "racer", s)
    ], result.stdout.str()[-3000:]  # nothing paid
    assert not list(runs.glob("*/candidates/racer"))  # never registered


@pytest.mark.attack(
    "runs-recorded",
    attack=(
        "a writer swaps a candidate's protected scorer for a lenient one just after the tamper screen read "
        "the folder (the leak screen, which reads it next, hashed the lenient bytes for registration)"
    ),
    outcome=(
        "refused before any rollout: every screen judges the one read of the candidate whose hash "
        "registration holds the snapshot to"
    ),
)
def test_a_scorer_swapped_in_after_the_tamper_screen_is_never_registered(
    example, projects, capevolve, monkeypatch
) -> None:
    project = _project(example, projects)
    racer = project / "candidates" / "racer"
    real = refusals.Screens._tampered
    judged: list[bool] = []

    def judge_then_swap(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        refused = real(self, *args, **kwargs)
        judged.append(refused)
        (racer / "scorer.py").write_text(LENIENT)  # the race, won: after the tamper screen judged it
        return refused

    monkeypatch.setattr(refusals.Screens, "_tampered", judge_then_swap)
    result = capevolve(project, "racer", gate=True, extra=["--capevolve-null", "0"])
    assert judged == [False]  # the tamper screen saw the honest scorer
    _refused_unpaid(project, result)
    assert result.ret == 4, result.stdout.str()[-3000:]
    assert "register it again once nothing writes to it" in result.stderr.str()  # the way on


@pytest.mark.attack(
    "runs-recorded",
    attack=(
        "a writer swaps a candidate that fails a microcase (noisy_agent's `regressed`: RULE:always-upsell) "
        "for a passing one after the screens read it, and back before the registration reads it, so that the "
        "microcases pass bytes that are never registered and the failing bytes are paid"
    ),
    outcome=(
        "refused before any rollout: the microcases run a copy of the one read the other screens judge and "
        "the registration holds (under the folder's name), so the swapped-in bytes are never what they judge"
    ),
)
def test_bytes_that_fail_a_microcase_swapped_out_and_back_around_it_are_never_paid(
    example, projects, capevolve, monkeypatch
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    racer = project / "candidates" / "racer"
    shutil.copytree(project / "candidates" / "regressed", racer)
    failing = (racer / "prompt.md").read_text()
    passing = (project / "capability" / "prompt.md").read_text() + "\nBe courteous.\n"
    leaks, microcases = refusals.Screens._leaks, refusals.Screens._fails_microcases
    judged: list[bool] = []

    def then_pass(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        found = leaks(self, *args, **kwargs)
        (racer / "prompt.md").write_text(passing)  # after the one read, before the microcases
        return found

    def then_fail(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        failed = microcases(self, *args, **kwargs)
        judged.append(failed)
        (racer / "prompt.md").write_text(failing)  # back, before the registration reads it
        return failed

    monkeypatch.setattr(refusals.Screens, "_leaks", then_pass)
    monkeypatch.setattr(refusals.Screens, "_fails_microcases", then_fail)
    result = capevolve(project, "racer", gate=True, extra=["--capevolve-null", "0"])
    assert judged == [True]  # the microcases judged the bytes read, not the ones swapped in
    _refused_unpaid(project, result)
    assert result.ret == 10 and "microcase" in result.stdout.str(), result.stdout.str()[-3000:]


@pytest.mark.attack(
    "laundering",
    attack=(
        "refuted bytes re-proposed with a trailing space, the folder swapped for other bytes just while the "
        "near-repeat check read it (after the screens and the exact-repeat check) and back before the "
        "registration: the check read the other text, and the refuted bytes were gated again (a re-roll)"
    ),
    outcome=(
        "refused: the near-repeat check reads the text of the bytes the screens read, which the registration "
        "holds"
    ),
)
def test_refuted_bytes_swapped_away_while_the_near_repeat_check_reads_are_not_regated(
    example, projects, capevolve, monkeypatch
) -> None:
    from pytest_capevolve._policy.repeats import identity

    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    shutil.rmtree(project / "microcases")  # 'regressed' is refuted by its rollouts here
    first = capevolve(project, "regressed", gate=True, extra=["--capevolve-null", "0"])
    assert first.ret == 10, first.stdout.str()[-3000:]  # refuted
    racer = project / "candidates" / "racer"
    shutil.copytree(project / "candidates" / "regressed", racer)
    refuted = (racer / "prompt.md").read_text() + "   "  # the same text, a trailing space
    (racer / "prompt.md").write_text(refuted)
    real = identity.same_text_as
    read: list[object] = []

    def swapped_while_read(*args, **kwargs):  # type: ignore[no-untyped-def]
        (racer / "prompt.md").write_text(refuted + "\nBe courteous.\n")  # other text, while it reads
        try:
            found = real(*args, **kwargs)
            read.append(found)
            return found
        finally:
            (racer / "prompt.md").write_text(refuted)  # back, before the registration reads it

    monkeypatch.setattr(identity, "same_text_as", swapped_while_read)
    again = capevolve(project, "racer", gate=True, extra=["--capevolve-null", "0"])
    assert len(read) == 1
    _refused_unpaid(project, again)
    again.stdout.fnmatch_lines(
        ["racer *REJECT*never paid for: *differs from 'regressed' only in line endings*"]
    )
