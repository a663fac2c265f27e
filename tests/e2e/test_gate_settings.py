"""Issue 24: gate settings frozen with the run. ``-o capevolve_gate_mode=threshold
--capevolve-null 0`` on a spec that does not pin the mode accepted a no-op without a word; a
gate setting changed between sessions of one run changed what "better" means mid-run."""

from __future__ import annotations

import json
import shutil


def _noop_project(example, projects, pin_mode: bool = True):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    if not pin_mode:
        projects.edit_spec(project, "gate_mode: exact\n", "")
    shutil.copytree(project / "capability", project / "candidates" / "noop")
    (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")
    return project


def _events(run_dir, kind):
    return [
        e for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines()) if e["kind"] == kind
    ]


def test_threshold_with_no_null_control_is_refused_before_anything_is_paid(example, projects, capevolve):
    project = _noop_project(example, projects, pin_mode=False)
    args = [
        "-o",
        "capevolve_gate_mode=threshold",
        "-o",
        "capevolve_gate_threshold=-0.5",
        "--capevolve-null",
        "0",
    ]
    result = capevolve(project, "noop", gate=True, extra=args)
    assert result.ret == 4
    err = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(err) == 1, err
    assert "gate_mode threshold with --capevolve-null 0" in err[0]
    assert "overridden on the command line: gate_mode=threshold, gate_threshold=-0.5" in err[0]
    assert not (project / ".capevolve").exists() or not list(
        (project / ".capevolve").rglob("rollouts/val/*.json")
    )


def test_a_command_line_override_is_recorded_in_the_verdict_and_said_in_the_summary(
    example, projects, capevolve
):
    project = _noop_project(example, projects)
    result = capevolve(
        project, "noop", gate=True, extra=["-o", "capevolve_gate_k_se=1.5", "--capevolve-commit", "none"]
    )
    assert result.ret == 10, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["noop: overridden on the command line: gate_k_se=1.5"])
    run_dir = projects.run_dir(project)
    verdict = json.loads((run_dir / "verdicts" / "noop.json").read_text())
    assert verdict["details"]["overridden"] == {"gate_k_se": "1.5"}
    assert verdict["details"]["gate_settings"]["gate_k_se"] == 1.5
    assert verdict["details"]["gate_settings"]["gate_mode"] == "exact"
    [frozen] = _events(run_dir, "gate_settings_frozen")
    assert frozen["settings"]["gate_k_se"] == 1.5 and frozen["overridden"] == {"gate_k_se": "1.5"}


def test_a_gate_setting_changed_mid_run_is_refused_unless_a_new_run(noop_gated, projects, capevolve):
    # _noop_project after its first gate (rejected, not booked): a copy of one build per process
    project = noop_gated
    run_dir = projects.run_dir(project)
    paid = len(list((run_dir / "rollouts" / "val").glob("*.json")))

    changed = capevolve(
        project, "noop", gate=True, extra=["-o", "capevolve_gate_k_se=2", "--capevolve-commit", "none"]
    )
    assert changed.ret == 4
    err = [line for line in changed.stderr.str().splitlines() if line.strip()]
    assert len(err) == 1 and "froze its gate settings" in err[0] and "gate_k_se 2.0 (frozen 1.0)" in err[0], (
        err
    )
    assert "overridden on the command line: gate_k_se=2" in err[0]

    projects.edit_spec(project, "gate_mode: exact", "gate_mode: paired")  # the spec edited instead
    edited = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert edited.ret == 4 and "gate_mode 'paired' (frozen 'exact')" in edited.stderr.str()
    assert len(list((run_dir / "rollouts" / "val").glob("*.json"))) == paid  # nothing paid
    assert len(_events(run_dir, "gate_settings_frozen")) == 1

    plain = capevolve(project)  # evaluating without deciding reads no gate setting
    assert plain.ret in (0, 1), plain.stderr.str()
    fresh = capevolve(project, "noop", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "none"])
    assert fresh.ret in (0, 10), fresh.stderr.str()


def test_gate_margin_asks_no_worse_than_and_is_frozen_with_the_run(example, projects, capevolve):
    """Issue 41: ``gate_margin: -0.5`` makes the gate ask "no worse than −0.5" — a no-op is
    accepted, the margin is in the verdict and frozen with the run; a margin > 0 is refused."""
    project = _noop_project(example, projects)
    projects.edit_spec(project, "gate_mode: exact\n", "gate_mode: exact\ngate_margin: 0.02\n")
    refused = capevolve(project, "noop", gate=True)
    assert (
        refused.ret == 4
        and "gate_margin" in refused.stderr.str()
        and "no worse than 0.02 below" in refused.stderr.str()
    )
    projects.edit_spec(project, "gate_margin: 0.02\n", "gate_margin: -0.5\n")
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret == 0, result.stdout.str()[-2000:]
    run_dir = projects.run_dir(project)
    verdict = json.loads((run_dir / "verdicts" / "noop.json").read_text())
    assert verdict["decision"] == "accept" and verdict["basis"] == "non_inferiority"
    assert verdict["margin"]["margin"] == -0.5 and verdict["margin"]["p_value"] <= 0.05
    assert "no worse than -0.5" in verdict["reason"]
    [frozen] = _events(run_dir, "gate_settings_frozen")
    assert frozen["settings"]["gate_margin"] == -0.5
    sequential = capevolve(project, "noop", gate=True, extra=["--capevolve-sequential"])
    assert sequential.ret == 4 and "gate without --capevolve-sequential" in sequential.stderr.str()
    projects.edit_spec(project, "gate_mode: exact\n", "gate_mode: paired\n")
    legacy = capevolve(project, "noop", gate=True)
    assert legacy.ret == 4 and "set gate_mode: exact, or drop gate_margin" in legacy.stderr.str()
