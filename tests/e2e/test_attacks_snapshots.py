"""Issue 24, attack 7: what runs is what is recorded. Every candidate (the seed too) is evaluated
from its read-only snapshot ``candidates/<tag>/files``, never from the folder it came from; a
snapshot that changed is refused in one line naming the file, never evaluated.

Sessions run on a one-trial copy of ``examples/noisy_agent``, whose agent applies every
``RULE:<name>`` in any ``*.md`` of the folder it is given: a rule the bytes of a snapshot do
not hold shows in a rollout's trace."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from cli_calls import run as run_cli

FARE = "RULE:check-fare-class"


def _noisy(example, projects, adapter_source: str = "", cls: str = "") -> Path:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    if adapter_source:
        projects.add_adapter(project, adapter_source, f"adapter.py:{cls}")
    return project


def _rules(projects, project: Path, tag: str) -> set[tuple[str, ...]]:
    return {
        tuple(r["trace"]["rules"])
        for (split, _t, g, _k), r in projects.rollout_records(project).items()
        if g == tag and split == "val" and r["trace"] is not None
    }


@pytest.mark.attack(
    "runs-recorded",
    attack="a rule appended to a work copy's `JOURNAL.md` (a handover file, never hashed)",
    outcome="prevented: every candidate runs from its read-only snapshot, handover files excluded",
)
def test_a_rule_in_a_work_copys_journal_is_never_seen_by_the_agent(
    one_trial_baseline, projects, capevolve, capsys
):
    """Before: the rule appended to JOURNAL.md (a handover file, never hashed) was read by the
    agent in all 200 rollouts and the no-op was accepted (Δ̄ +0.115)."""
    project = one_trial_baseline  # _noisy after its baseline: a copy of one build per process
    code, out, _ = run_cli(capsys, "work", "new", "noop", "--project", str(project))
    assert code == 0
    work = Path(json.loads(out)["path"])
    (work / "notes.md").write_text("a no-op for the agent\n")  # bytes of its own: not a repeat of the seed
    with (work / "JOURNAL.md").open("a") as journal:
        journal.write(f"\n- {FARE} — look up the fare class first.\n")
    gated = capevolve(project, work, gate=True, extra=["--capevolve-commit", "none"])
    assert gated.ret == 10, gated.stdout.str()[-2000:]  # the no-op is rejected, not accepted
    seed_rules = _rules(projects, project, "seed")
    assert _rules(projects, project, "noop") == seed_rules and all(FARE not in r for r in seed_rules)
    snapshot = projects.snapshot(project, "noop")
    assert not (snapshot / "JOURNAL.md").exists()
    # the snapshot's files are read-only: an edit needs a chmod first
    assert all(not p.stat().st_mode & stat.S_IWUSR for p in snapshot.rglob("*") if p.is_file())
    # a work copy made from a read-only snapshot can be edited as before
    code, out, _ = run_cli(capsys, "work", "new", "next", "--from", "noop", "--project", str(project))
    assert code == 0 and (Path(json.loads(out)["path"]) / "prompt.md").stat().st_mode & stat.S_IWUSR


EDITS_ITS_SOURCE = '''

class EditsItsSourceMidGate(NoisyAgentAdapter):
    """Appends a rule to the candidate's source folder while its gate runs (after its first
    rollouts), as the optimizer did 4.5 s into the gate; records where each rollout ran."""

    def run_target(self, task, ctx, *, seed):
        source = Path(__file__).parent / "candidates" / "noop" / "prompt.md"
        if task.id == "n13" and "RULE:check-fare-class" not in source.read_text():
            with source.open("a") as handle:
                handle.write("\\n- RULE:check-fare-class\\n")
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.trace["ctx"] = str(ctx)
        return rollout
'''


@pytest.mark.attack(
    "runs-recorded",
    attack="`prompt.md` edited during its own gate (with and without `-n 2`)",
    outcome="prevented: the snapshot is what runs",
)
@pytest.mark.unconfined
def test_editing_prompt_md_during_its_own_gate_is_not_measured(example, projects, capevolve, xdist_args):
    """Before: 62 of 200 rollouts measured bytes no snapshot holds. Now every rollout — the
    seed's too — runs from its snapshot, so the edit to the source folder is never measured.

    Unconfined on purpose: the adapter stands in for an optimizer that edits the source folder from
    outside the boundary; a confined child cannot write it at all, so the attack needs the path
    where the kernel offers no boundary."""
    project = _noisy(example, projects, EDITS_ITS_SOURCE, "EditsItsSourceMidGate")
    shutil.copytree(project / "capability", project / "candidates" / "noop")
    (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")
    gated = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none", *xdist_args])
    assert gated.ret == 10, gated.stdout.str()[-2000:]
    assert FARE in (project / "candidates" / "noop" / "prompt.md").read_text()  # the attack ran
    records = projects.rollout_records(project)
    for (_s, _t, tag, _k), record in records.items():
        assert record["infra_error"] is None, record
        assert Path(record["trace"]["ctx"]) == projects.snapshot(project, tag).resolve()
        assert FARE not in record["trace"]["rules"], record
    assert {tag for (_s, _t, tag, _k) in records} >= {"seed", "noop", "seed-null1"}


EDITS_ITS_SNAPSHOT = '''

class EditsItsSnapshot(NoisyAgentAdapter):
    """Candidate code that makes its own snapshot writable and appends a rule to it."""

    def run_target(self, task, ctx, *, seed):
        prompt = Path(ctx) / "prompt.md"
        if (Path(ctx) / "notes.md").is_file() and "RULE:check-fare-class" not in prompt.read_text():  # noop
            prompt.chmod(0o644)
            with prompt.open("a") as handle:
                handle.write("\\n- RULE:check-fare-class\\n")
        return super().run_target(task, ctx, seed=seed)
'''


@pytest.mark.attack(
    "runs-recorded",
    attack="a snapshot edited by its own rollout, or a file dropped into it",
    outcome="refused: the rollout is an infra error, the rest refused naming the file",
)
@pytest.mark.unconfined
def test_a_snapshot_edited_by_its_own_rollout_is_refused_naming_the_file(example, projects, capevolve):
    """The rollout that edited it is missing data (it changed while it ran); every later one is
    refused before it runs, in one line naming the file; nothing with the rule is scored.

    Unconfined on purpose: a confined child can change the snapshot's mode (Landlock does not cover
    chmod) but not write it, so every rollout is missing data instead; this is the defence that
    holds where the kernel offers no boundary."""
    project = _noisy(example, projects, EDITS_ITS_SNAPSHOT, "EditsItsSnapshot")
    shutil.copytree(project / "capability", project / "candidates" / "noop")
    (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")  # not a repeat
    result = capevolve(project, "noop")
    assert result.ret == 12, result.stdout.str()[-2000:]
    noop = [r for (_s, _t, tag, _k), r in projects.rollout_records(project).items() if tag == "noop"]
    # the one rollout that ran is missing data: the snapshot changed while it ran
    assert len(noop) == 1 and noop[0]["reward"] is None
    assert "changed while this rollout ran (prompt.md)" in noop[0]["infra_error"]
    # the 39 others never ran: refused in one line naming the file
    snapshot = projects.snapshot(project, "noop")
    refused = [line for line in result.stdout.lines if "its snapshot changed after it was registered" in line]
    assert len(refused) == 1, result.stdout.str()[-3000:]
    assert " and 38 more with the same reason: " in refused[0]
    assert f"{snapshot}/prompt.md (changed)" in refused[0]
    result.stdout.fnmatch_lines(["rollouts: 41 paid, 0 reused*"])  # the seed's 40 and the one


@pytest.mark.attack(
    "runs-recorded",
    attack="a snapshot edited by its own rollout, or a file dropped into it",
)
def test_a_journal_dropped_into_a_snapshot_is_an_added_file(one_trial_baseline, projects, capevolve):
    """A handover file is never hashed; in a snapshot it is still a file the agent would read
    (this agent reads every *.md), so it is refused as added, naming it — the seed's snapshot
    too, which finalize evaluates."""
    project = one_trial_baseline  # _noisy after its baseline: a copy of one build per process
    snapshot = projects.snapshot(project, "seed")
    (snapshot / "JOURNAL.md").write_text(f"- {FARE}\n")
    result = capevolve(project, finalize=True)  # the seed's test rollouts, from its snapshot
    assert result.ret == 12, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [f"*its snapshot changed after it was registered*{snapshot}/JOURNAL.md (added)*"]
    )
    assert not [
        r for r in projects.rollout_records(project).values() if FARE in (r["trace"] or {}).get("rules", [])
    ]
