"""Attacks on adopting an earlier run's accept (``capevolve commit TAG --decision accept`` on a
REPEAT in a new run; hill-climb asks the same check): what a user edits in the earlier run's folder
to get a best no gate accepted."""

from __future__ import annotations

import importlib
import json

import pytest
from cli_calls import run
from fix_list_project import fixing, split_ids


def _registered(rundir) -> dict[str, str]:
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    return {e["tag"]: e["content_hash"] for e in events if e["kind"] == "candidate_registered"}


def _nothing_booked(second) -> None:
    """The new run after a refused booking: the seed still its best, no decision, and no tag holding
    bytes no gate saw (refused before the copy)."""
    assert json.loads((second / "state.json").read_text())["best_id"] == "seed"
    assert "big" not in _registered(second)
    assert not [
        e
        for e in map(json.loads, (second / "events.jsonl").read_text().splitlines())
        if e["kind"] == "decision"
    ]


def _commit_swapping(project, capevolve, capsys, monkeypatch, swap):
    """'big' repeated in a new run, then `capevolve commit big --decision accept` with ``swap(found)``
    run right after adoption's check: deterministic, no timing."""
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15
    # the module the command imports next (an inline session may have dropped an earlier import)
    commit = importlib.import_module("pytest_capevolve._policy.booking.commit")
    checked = commit.adoption

    def raced(*args, **kwargs):
        found = checked(*args, **kwargs)
        swap(found)
        return found

    monkeypatch.setattr(commit, "adoption", raced)
    return run(capsys, "commit", "big", str(project), "--decision", "accept")


@pytest.mark.attack(
    "laundering",
    attack=(
        "the earlier run's snapshot of accepted bytes edited (made writable, every val task fixed), then "
        "those accepted bytes repeated in a new run and `capevolve commit TAG --decision accept`: the new "
        "run registered the edited snapshot as its best, never gated"
    ),
    outcome=(
        "refused: the earlier snapshot must hash to the bytes that run registered and this run's repeat "
        "names; nothing is registered or booked"
    ),
)
def test_an_edited_snapshot_of_accepted_bytes_is_not_adopted(
    fix_list_big_accepted, projects, capevolve, capsys
):
    project = fix_list_big_accepted
    snapshot = projects.snapshot(project, "big")
    snapshot.chmod(0o755)
    (snapshot / "prompt.md").chmod(0o644)
    (snapshot / "prompt.md").write_text(
        (project / "candidates" / "big" / "prompt.md").read_text() + "fix all\n"
    )
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    # before: exit 0, best 'big' registered from the edited snapshot (another content hash), unpaid
    assert code != 0 and "no longer holds the bytes it registered" in err, err
    assert "gate a changed version" in err
    second = projects.run_dir(project)
    events = [json.loads(line) for line in (second / "events.jsonl").read_text().splitlines()]
    assert not [
        e for e in events if e["kind"] in ("decision", "candidate_registered") and e.get("tag") == "big"
    ]
    assert json.loads((second / "state.json").read_text())["best_id"] == "seed"


@pytest.mark.attack(
    "laundering",
    attack=(
        "a new run whose first session met only the repeat: the accept adopted while `capability/` held "
        "the seed it was accepted against, then `capability/` swapped for other bytes; the run's seed was "
        "never registered, so the next sessions (and finalize's seed arm) took the new bytes for 'seed' "
        "beside a best labelled 'accepted against the same bytes as seed'"
    ),
    outcome=(
        "prevented: booking the adoption registers the bytes it was accepted against as the run's seed; "
        "every later session (finalize's seed arm too) runs the seed from that snapshot"
    ),
)
def test_an_adopted_accept_keeps_the_seed_it_was_accepted_against(
    fix_list_big_accepted, projects, capevolve, capsys
):
    project = fix_list_big_accepted
    first = projects.run_dir(project)
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15
    assert run(capsys, "commit", "big", str(project), "--decision", "accept")[0] == 0
    seed = project / "capability" / "prompt.md"
    seed.write_text(
        seed.read_text() + "".join(f"fix {t}\n" for t in split_ids(project, "val"))
    )  # another seed, never gated

    finalized = capevolve(project, finalize=True)

    # before: finalize registered and scored the swapped bytes as this run's 'seed' against the
    # adopted best; now the seed arm is the seed the accept was against
    assert finalized.ret == 0, finalized.stdout.str()
    assert _registered(projects.run_dir(project))["seed"] == _registered(first)["seed"]


@pytest.mark.attack(
    "laundering",
    attack=(
        "the earlier run's snapshot swapped for edited bytes between adoption's check and the booking's "
        "copy of it (a loop renaming two versions in turn, won once): the copy registered was not what "
        "was checked"
    ),
    outcome=(
        "refused: the booking compares the bytes it registered with the repeat's content hash; nothing "
        "booked, the best stays"
    ),
)
def test_a_snapshot_swapped_while_an_adoption_is_booked_is_not_booked(
    fix_list_big_accepted, projects, capevolve, capsys, monkeypatch
):
    project = fix_list_big_accepted

    def swap(found):
        (found.snapshot / "prompt.md").chmod(0o644)
        (found.snapshot / "prompt.md").write_text("fix all\n")

    code, _, err = _commit_swapping(project, capevolve, capsys, monkeypatch, swap)

    # before: exit 0, best 'big' holding 'fix all', never gated
    assert code != 0 and "changed while it was adopted: nothing booked" in err, err
    _nothing_booked(projects.run_dir(project))


@pytest.mark.attack(
    "laundering",
    attack=(
        "a new run that had not registered its seed: `capability/` swapped for other bytes between "
        "adoption's check that it holds the seed the accept was against and the booking's copy of it "
        "(won once): the copy registered as the run's seed was not what was checked"
    ),
    outcome=(
        "refused: the booking compares the seed it registered with the hash the check compared; "
        "nothing booked, the best stays the seed"
    ),
)
def test_a_seed_swapped_while_an_adoption_is_booked_is_not_booked(
    fix_list_big_accepted, projects, capevolve, capsys, monkeypatch
):
    project = fix_list_big_accepted

    def swap(found):
        seed = project / "capability" / "prompt.md"
        seed.write_text(seed.read_text() + "".join(f"fix {t}\n" for t in split_ids(project, "val")))

    code, _, err = _commit_swapping(project, capevolve, capsys, monkeypatch, swap)

    # before: exit 0, the swapped bytes registered as the seed of a best labelled 'accepted against
    # the same bytes as seed'
    assert code != 0 and "capability changed while it was adopted: nothing booked" in err, err
    _nothing_booked(projects.run_dir(project))


@pytest.mark.attack(
    "laundering",
    attack=(
        "run A's accept adopted by run B, run A's folder moved out, the bytes proposed again in run C and "
        '`capevolve commit TAG --decision accept`: refused as "accepted in run B against its gate (which '
        "said 'repeat')\", though no gate was overruled"
    ),
    outcome=(
        "refused in one line saying what is true: run B's adoption yields to run A's accept it carried, "
        "whose record is not in this project any more; the way on (gate a changed version)"
    ),
)
def test_an_adoption_is_not_adopted_again_and_the_refusal_says_why(
    fix_list_big_accepted, projects, capevolve, capsys, tmp_path
):
    project = fix_list_big_accepted
    first = projects.run_dir(project)
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15
    assert run(capsys, "commit", "big", str(project), "--decision", "accept")[0] == 0
    second = projects.run_dir(project)
    first.rename(tmp_path / first.name)  # run A moved out: run B's adoption is what is left
    assert capevolve(project, "big", gate=True, extra=["--capevolve-new-run"]).ret == 15

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    # before: "'big' was accepted in run B against its gate (which said 'repeat')": no gate was overruled
    assert code != 0, err
    assert "against its gate" not in err, err
    # the adoption yields to the accept it carried (remembered by the project's memory), whose record
    # is gone: that is what the refusal names
    assert f"accepted in run {first.name}, whose record is not in this project any more" in err, err
    assert "gate a changed version" in err and second.name not in err


@pytest.mark.attack(
    "laundering",
    attack=(
        "the gate's accept of 'big' repaired to reject there (`capevolve commit big --decision reject "
        "--reject-basis gate --force` once another best stood), then 'big' proposed again in a new run and "
        "`capevolve commit big --decision accept`: adopted as the new run's best, the repair ignored"
    ),
    outcome=(
        "the repair is the decision that stands: the new run books the bytes a repeat of that reject, "
        "naming the repair (its event seq); the commit is refused, the best stays"
    ),
)
def test_an_accept_repaired_to_reject_there_is_not_adopted(
    fix_list_big_accepted, projects, capevolve, capsys
):
    project = fix_list_big_accepted
    fixing(project, "bigger", split_ids(project, "val")[:10])
    assert capevolve(project, "bigger", gate=True, extra=["--capevolve-commit", "auto"]).ret == 0
    repair = ["--decision", "reject", "--reject-basis", "gate", "--force"]
    assert run(capsys, "commit", "big", str(project), *repair)[0] == 0
    again = capevolve(project, "big", gate=True, extra=["--capevolve-new-run"])

    # the repair is the decision that stands (issue 38): before, the run's first decision was looked
    # up, and the new run said "REPEAT … that accept stands", naming a commit that was then refused
    out = again.stdout.str()
    assert again.ret == 10 and "rejected by `capevolve commit --force` (event seq" in out, out
    assert "that accept stands" not in out and "--decision accept" not in out, out
    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")
    assert code != 0 and "'big' was already decided: reject" in err, err
    second = projects.run_dir(project)
    assert json.loads((second / "state.json").read_text())["best_id"] == "seed"


@pytest.mark.attack(
    "laundering",
    attack=(
        "another run's accept proposed in a new run with trailing whitespace added: `REPEAT`, but "
        "`capevolve commit TAG --decision accept` refused (adoption takes the exact bytes) and no line "
        "said how to adopt that accept"
    ),
    outcome=(
        "still a REPEAT, never adopted; the session's line and the refusal say the way on: propose that "
        "tag's exact bytes, or gate a changed version"
    ),
)
def test_a_near_repeat_of_another_runs_accept_says_only_the_exact_bytes_are_adopted(
    fix_list_baseline, capevolve, capsys
):
    project = fix_list_baseline
    big = fixing(project, "big", split_ids(project, "val")[:5])
    assert capevolve(project, "big", gate=True, extra=["--capevolve-commit", "auto"]).ret == 0
    spaced = project / "candidates" / "big_ws"
    spaced.mkdir()
    (spaced / "prompt.md").write_text((big / "prompt.md").read_text() + "   ")
    session = capevolve(project, "big_ws", gate=True, extra=["--capevolve-new-run"])
    assert session.ret == 15

    code, _, err = run(capsys, "commit", "big_ws", str(project), "--decision", "accept")

    # before: the REPEAT line and the refusal named no way to adopt that accept (adoption looks up
    # the exact bytes); now both say to propose 'big''s exact bytes, or gate a changed version
    way = "only its exact bytes are adopted: propose 'big''s bytes, or gate a changed version"
    assert way in session.stdout.str()
    assert code != 0 and way in err, err


@pytest.mark.attack(
    "laundering",
    attack=(
        "the gate's reject of 'one' repaired to accept (`capevolve commit one --decision accept --force`), "
        "then 'one' proposed again in a new run, where a repeat reports the latest decision on its bytes: "
        'reported as an accept at the level of the gate that rejected it, "that accept stands"'
    ),
    outcome=(
        "a REPEAT naming the repair (its event seq, at no gate's level), never offered for adoption: the "
        "line says only a gate's accept is adopted; nothing booked, nothing paid"
    ),
)
def test_a_reject_repaired_to_accept_is_said_as_the_repair_and_not_offered_for_adoption(
    fix_list_baseline, capevolve, capsys
):
    project = fix_list_baseline
    fixing(project, "one", split_ids(project, "val")[:1])  # one task fixed: p = 1/2, the gate rejects
    assert capevolve(project, "one", gate=True, extra=["--capevolve-commit", "auto"]).ret == 10
    assert run(capsys, "commit", "one", str(project), "--decision", "accept", "--force")[0] == 0

    again = capevolve(project, "one", gate=True, extra=["--capevolve-new-run"])

    # the latest decision is the forced accept: said as what it is, with no commit command that is refused
    out = again.stdout.str()
    assert again.ret == 15 and "accepted by `capevolve commit --force` (event seq" in out, out
    assert "not by its gate" in out and "that accept stands" not in out, out
    assert "--decision accept` adopts" not in out and "only a gate's accept is adopted" in out, out
    assert "one: nothing booked — repeat of 'one' (accepted)" in out, out  # at no gate's level
