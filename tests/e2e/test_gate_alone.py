"""Explore fast, gate slow, gate alone (issue 26, item 6): a gate session says, in its summary
and in every verdict, when another session was paying rollouts on the project beside it, and
when it paid at another load than the one its null controls were measured at."""

from __future__ import annotations

import fcntl
import json
import shutil


def _reworded(project):
    """A candidate with other bytes and the seed's answers (a reject), and ``careful``."""
    same = project / "candidates" / "reworded"
    shutil.copytree(project / "capability", same)
    (same / "prompt.md").write_text((same / "prompt.md").read_text() + "Be brief.\n")


def test_a_gate_beside_another_paying_session_says_it_did_not_gate_alone(
    toy_calc_baseline, projects, capevolve
) -> None:
    project = toy_calc_baseline
    # another session of the project, paying rollouts in another run: it holds its claim's lock
    claims = project / ".capevolve" / "runs" / "20000101-000000-explore" / "claims"
    claims.mkdir(parents=True)
    claim = claims / "4242-beef.json"
    claim.write_text(json.dumps({"pid": 4242, "host": "h", "since": 0, "keys": [["val", "q01", "x", 0]]}))
    with open(claim, "r+", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        gated = capevolve(project, "careful", gate=True, extra=["--capevolve-null", "1"])
    gated.stdout.fnmatch_lines(
        ["*this gate did not run alone: 1 other session(s)*pid 4242 in run 20000101-000000-explore*"]
    )
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    assert any("did not run alone" in w for w in verdict["warnings"])


def test_a_gate_at_another_concurrency_than_its_nulls_says_so(example, projects, capevolve) -> None:
    project = example("toy_calc")
    _reworded(project)
    first = capevolve(project, "reworded", gate=True, extra=["--capevolve-null", "1"])
    assert first.ret == 10  # a reject: the best stays the seed, and so do its null controls
    assert (
        "did not run alone" not in first.stdout.str()
        and "null controls were measured" not in first.stdout.str()
    )
    loads = [
        e
        for e in map(json.loads, (projects.run_dir(project) / "events.jsonl").read_text().splitlines())
        if e["kind"] == "session_load"
    ]
    assert loads and loads[-1]["in_flight"] == 1 and "seed-null1" in loads[-1]["paid_tags"]
    second = capevolve(
        project, "careful", gate=True, extra=["--capevolve-null", "1", "--capevolve-concurrency", "4"]
    )
    second.stdout.fnmatch_lines(
        [
            "*this gate paid at 4 rollout(s) in flight, but its null controls were measured at 1 (null reward means — 1 in flight: *"
        ]
    )
    # before: "gate at the nulls' load", which said neither -n nor --capevolve-concurrency
    second.stdout.fnmatch_lines(
        ["*gate at the nulls' load (a session without -n and --capevolve-concurrency), or with fresh*"]
    )
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "careful.json").read_text())
    assert any("null controls were measured at 1" in w for w in verdict["warnings"])
