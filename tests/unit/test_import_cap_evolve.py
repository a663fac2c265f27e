"""`capevolve import-cap-evolve` on a cap-evolve project and run dir in cap-evolve's own layout,
built from the real tau2 run in tests/data (val: shared_data; test: its sealed FINAL scores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cap_evolve_project import ADAPTER, SPEC, _import, _rollout

from pytest_capevolve._cli.main import main
from pytest_capevolve._loop.cap_evolve.run_reader import read_run
from pytest_capevolve._project.cap_evolve_keys import NOT_USED, SAME, translate
from pytest_capevolve._project.spec import SpecError, load_spec
from pytest_capevolve._store.log.event_chain import verify_events
from pytest_capevolve._store.readers.audit import audit
from pytest_capevolve._store.rundir import RunDir

RECORDED = {  # cap-evolve's paired gate (k = 0.2) on this run: tag → (Δ̄, SE), n = 12, all rejected
    "c0_null5": (-0.1000, 0.0628),
    "c0_null5b": (-0.0500, 0.0702),
    "c0_null5c": (0.0000, 0.0696),
    "cA_partial": (0.0167, 0.0672),
    "cB_becabin": (0.0167, 0.0796),
}
RECORDED_TEST_REWARD = 0.5  # its final.json: the best's (the seed's) sealed test reward
# every key the public cap-evolve's bundled specs, templates and intake use
CAP_EVOLVE_SPEC_KEYS = (
    "capabilities capability_path actions capability_sources optimizer_skill optimizer_model "
    "optimizer_max_turns optimizer_usd_per_iter target_model orchestration_mode algorithm_skill "
    "algorithm_focus dataset_source split_seed split_train split_val split_test split_ids_file "
    "num_trials gate_mode gate_k_se max_iterations stall max_metric_calls max_usd max_optimizer_usd "
    "stop_condition store store_commit_cmd protected_paths convergence runner_repo_path "
    "optimizer_instructions_file target_profile_file algorithm_args reuse_baseline dashboard "
    "dashboard_port metric_primary metrics_display metric_directions github_integration"
).split()


def _last_json(text: str) -> dict:
    """The verdict `capevolve gate --json` printed (alone, or after the table)."""
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.strip().splitlines()[-1])


def test_imported_run_gates_to_the_numbers_cap_evolve_recorded(cap_evolve, tmp_path, capsys, monkeypatch):
    project, run = cap_evolve
    dest = tmp_path / "here"
    report = _import(capsys, project, dest, "--run", run)
    assert report["run"]["rollouts"] == {**{f"val/{t}": 60 for t in [*RECORDED, "seed"]}, "test/seed": 60}
    assert report["run"]["skipped"] == {} and report["run"]["unreadable"] == []
    monkeypatch.chdir(dest)
    for tag, (delta, se) in RECORDED.items():
        # cap-evolve's gate: paired Δ̄ > 0.2·SE, and (as in its run) a regression vetoes
        code = main(["gate", tag, "--veto-regressions", "--json"])
        verdict = _last_json(capsys.readouterr().out)
        assert (verdict["mode"], verdict["k_se"], verdict["n_tasks"]) == ("paired", 0.2, 12)
        assert round(verdict["delta_mean"], 4) == pytest.approx(delta, abs=1e-12)
        assert round(verdict["se"], 4) == pytest.approx(se, abs=1e-12)
        assert verdict["decision"] == "reject" and code == 10
    # the test split was scored once, by cap-evolve: the seal is burned with that score, and
    # measure reads it instead of scoring test a second time
    assert main(["measure"]) == 0
    out = capsys.readouterr().out
    assert "running finalize" not in out
    seal = json.loads((Path(report["run"]["run_dir"]) / "seal.json").read_text())
    assert seal["best"]["tag"] == "seed" and seal["best"]["mean"] == pytest.approx(RECORDED_TEST_REWARD)
    # the imported run's files agree with its hash-chained log, as `capevolve verify` checks
    rundir = RunDir(Path(report["run"]["run_dir"]))
    assert verify_events(rundir.events_path)[1] is None and audit(rundir) == []


def test_every_cap_evolve_key_is_mapped_or_says_why_not(cap_evolve, tmp_path, capsys):
    assert translate(dict.fromkeys(CAP_EVOLVE_SPEC_KEYS, 1)).unknown == []
    project, _run = cap_evolve
    report = _import(capsys, project, tmp_path / "here")
    written = (tmp_path / "here" / "capevolve.yaml").read_text()
    spec = load_spec(tmp_path / "here")  # the written spec is one of ours
    assert (spec.gate_mode, spec.gate_k_se, spec.num_trials, spec.max_usd) == ("paired", 0.2, 5, 55.0)
    assert spec.base_seed == 0 and spec.split_ids_file is not None
    for key in (line.partition(":")[0] for line in SPEC.splitlines() if line and not line.startswith("#")):
        note = report["keys"][key]
        if key in SAME:
            assert f"\n{key}:" in written, key
        else:
            assert note.startswith("not used here, because ") and f"#   {key}: {note}" in written, key
    assert report["adapter"]["rewritten_imports"] == ["adapters/adapter.py:5"]
    assert main(["check", str(tmp_path / "here")]) == 0, capsys.readouterr().out


def test_cap_evolve_keys_in_a_spec_get_their_sentence_not_unknown_key(example, projects):
    project = example("toy_calc")
    projects.edit_spec(
        project, "num_trials: 1", "num_trials: 1\norchestration_mode: agent\nmax_optimizer_usd: 40"
    )
    with pytest.raises(SpecError) as info:
        load_spec(project)
    message = str(info.value)
    assert "unknown key" not in message and "\n" not in message
    for key in ("orchestration_mode", "max_optimizer_usd"):
        assert f"{key!r} is a cap-evolve key, not used here, because {NOT_USED[key]}" in message


def test_zero_ceilings_mean_unlimited_and_auto_is_paired():
    translation = translate({"max_usd": 0.0, "stall": 0, "max_metric_calls": 600, "gate_mode": "auto"})
    assert translation.spec == {"max_metric_calls": 600, "gate_mode": "paired"}
    assert "unlimited" in translation.notes["max_usd"] and "unlimited" in translation.notes["stall"]


def test_an_errored_cap_evolve_trial_is_missing_data_never_a_zero(cap_evolve):
    _project, run = cap_evolve
    errored = _rollout("0", 0.0, "")
    errored["rollout"]["error"] = "429 Too Many Requests"
    (run / "rollouts" / "val" / "0__seed__t0.json").write_text(json.dumps(errored))
    flagged = _rollout("4", 0.0, "")
    flagged["score"]["raw"] = {"errored": True}
    (run / "rollouts" / "val" / "4__seed__t0.json").write_text(json.dumps(flagged))
    records = {
        (r.task_id, r.tag, r.trial): r.record(
            run_id="r", tag=r.tag, seed=r.trial, candidate_hash="h", threshold=1.0
        )
        for r in read_run(run).rollouts
    }
    for key in (("0", "seed", 0), ("4", "seed", 0)):
        assert records[key].reward is None and records[key].infra_error and not records[key].valid
    assert records[("8", "seed", 0)].valid


def test_refusals_say_what_and_overwrite_nothing(cap_evolve, tmp_path, capsys):
    project, run = cap_evolve
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "capevolve.yaml").write_text("mine\n")
    assert main(["import-cap-evolve", str(project), str(dest)]) == 2
    err = capsys.readouterr().err
    assert "already exist" in err and err.count("\n") == 1
    assert (dest / "capevolve.yaml").read_text() == "mine\n" and not (dest / "adapters").exists()
    assert main(["import-cap-evolve", str(tmp_path / "nowhere"), str(tmp_path / "d")]) == 2
    assert "no cap-evolve spec there" in capsys.readouterr().err
    assert main(["import-cap-evolve", str(project), str(tmp_path / "d2"), "--run", str(project)]) == 2
    assert "splits.json is missing" in capsys.readouterr().err


def test_a_failed_import_leaves_dest_as_it_was(cap_evolve, tmp_path, capsys):
    project, run = cap_evolve
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text().replace("num_trials: 5", "num_trials: 0"))
    dest = tmp_path / "here"
    dest.mkdir()
    (dest / "notes.txt").write_text("kept\n")
    assert main(["import-cap-evolve", str(project), str(dest), "--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert "the imported spec is not valid here" in err and "num_trials" in err
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]


def test_screen_rollouts_keep_their_candidate_and_snapshotless_tags_are_skipped(cap_evolve, tmp_path, capsys):
    project, run = cap_evolve
    for tid in ("0", "4", "8"):  # a cheap screen of cA_partial on three val tasks
        (run / "rollouts" / "val" / f"{tid}__cA_partial__screen1__t0.json").write_text(
            json.dumps(_rollout(tid, 1.0, ""))
        )
    (run / "rollouts" / "val" / "0__ghost__t0.json").write_text(json.dumps(_rollout("0", 1.0, "")))
    report = _import(capsys, project, tmp_path / "here", "--run", run)["run"]
    assert report["rollouts"]["val/cA_partial-screen1"] == 3
    assert list(report["skipped"]) == ["ghost"] and "no snapshot" in report["skipped"]["ghost"]
    candidates = Path(report["run_dir"]) / "candidates"
    hashes = {
        t: json.loads((candidates / t / "candidate.json").read_text())["content_hash"]
        for t in ("cA_partial", "cA_partial-screen1")
    }
    assert hashes["cA_partial"] == hashes["cA_partial-screen1"]


def test_the_adapter_class_is_read_from_the_file_not_guessed(cap_evolve, tmp_path, capsys):
    project, _run = cap_evolve
    adapter = project / "adapters" / "adapter.py"
    adapter.write_text(ADAPTER.replace("class Adapter(", "class MyAdapter("))
    report = _import(capsys, project, tmp_path / "here")
    assert report["adapter"]["class"] == "MyAdapter" and "`Adapter`" in report["adapter"]["class_note"]
    assert load_spec(tmp_path / "here").adapter == "adapters/adapter.py:MyAdapter"
    assert main(["check", str(tmp_path / "here")]) == 0, capsys.readouterr().out
    capsys.readouterr()
    # an alias is what cap-evolve itself loads: taken as is, no note
    adapter.write_text(ADAPTER.replace("class Adapter(", "class MyAdapter(") + "\nAdapter = MyAdapter\n")
    report = _import(capsys, project, tmp_path / "aliased")
    assert (report["adapter"]["class"], report["adapter"]["class_note"]) == ("Adapter", None)
    # two candidates, or none: refused with the fix, nothing written
    two = (
        ADAPTER.replace("class Adapter(", "class MyAdapter(")
        + "\n\nclass Other(CapabilityAdapter):\n    pass\n"
    )
    for text, words in ((two, "MyAdapter, Other all look like one"), ("X = 1\n", "no class looks like one")):
        adapter.write_text(text)
        assert main(["import-cap-evolve", str(project), str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err
        assert words in err and "Adapter = YourClass" in err and err.count("\n") == 1
        assert not (tmp_path / "refused").exists()
