"""`capevolve import-cap-evolve` on a cap-evolve project in cap-evolve's own layout (its run dir
is not carried over: the paired mode's reproduction of that run's numbers is test_shared_data's)."""

from __future__ import annotations

import pytest
from cap_evolve_project import ADAPTER, SPEC, _import

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.cap_evolve_keys import NOT_USED, SAME, translate
from pytest_capevolve._project.spec import SpecError, load_spec

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
    # a cap-evolve run is not carried over: --run is refused naming the project import, nothing written
    with pytest.raises(SystemExit) as exited:
        main(["import-cap-evolve", str(project), str(tmp_path / "d2"), "--run", str(run)])
    assert exited.value.code == 2 and not (tmp_path / "d2").exists()
    assert "--run was dropped; a cap-evolve run's rollouts were not recorded" in capsys.readouterr().err


def test_a_failed_import_leaves_dest_as_it_was(cap_evolve, tmp_path, capsys):
    project, run = cap_evolve
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text().replace("num_trials: 5", "num_trials: 0"))
    dest = tmp_path / "here"
    dest.mkdir()
    (dest / "notes.txt").write_text("kept\n")
    assert main(["import-cap-evolve", str(project), str(dest)]) == 2
    err = capsys.readouterr().err
    assert "the imported spec is not valid here" in err and "num_trials" in err
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]


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
