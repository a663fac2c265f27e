"""End to end: `pytest --capevolve-run` on the bundled examples, with and without xdist."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil

import pytest


def test_items_ids_and_count(example, projects, capevolve) -> None:
    """In process only: the xdist controller lists no collected items (the same items under
    -n 2 are test_records_identical_with_and_without_xdist's)."""
    project = example("toy_calc")
    result = capevolve(project, "careful", extra=["--collect-only", "-q"])
    splits = json.loads((projects.run_dir(project) / "splits.json").read_text())
    val = splits["val"]
    assert len(val) == 12
    result.stdout.fnmatch_lines([f"toy_calc/capevolve.yaml::val::{val[0]}[[]seed-t0[]]"])
    ids = [ln for ln in result.stdout.lines if "capevolve.yaml::val::" in ln]
    assert len(ids) == 12 * 2
    assert ids[:2] == [
        f"toy_calc/capevolve.yaml::val::{val[0]}[seed-t0]",
        f"toy_calc/capevolve.yaml::val::{val[0]}[careful-t0]",
    ]


def test_run_persists_records_and_resume_pays_nothing(
    example, projects, capevolve, xdist_args: list[str]
) -> None:
    project = example("toy_calc")
    first = capevolve(project, "careful", extra=xdist_args)
    assert first.ret == 0  # failing tasks are not a failing session
    first.assert_outcomes(passed=14, failed=10)
    first.stdout.fnmatch_lines(
        ["*seed*val*12*1*0.333*", "*careful*val*12*1*0.833*", "rollouts: 24 paid, 0 reused*"]
    )
    records = projects.rollout_records(project)
    assert len(records) == 24
    assert {r["seed"] for r in records.values()} == {0}

    second = capevolve(project, "careful", extra=xdist_args)
    assert second.ret == 0
    second.stdout.fnmatch_lines(["rollouts: 0 paid, 24 reused*"])
    if xdist_args:  # nothing owed: no worker is started only to run no item
        assert "workers" in first.stdout.str() and "workers" not in second.stdout.str()
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["spent"]["metric_calls"] == 24
    assert projects.rollout_records(project) == records
    assert gc.isenabled()  # the sessions paused the collector for their plan and conclusion only
    # the index's SQLite files are closed as the session ends, not left to the collector: three
    # descriptors per in-process session, until a suite's worker held more than select() takes
    assert [link for link in _open_files() if str(project) in link and "index.sqlite" in link] == []


def test_records_identical_with_and_without_xdist(example, projects, capevolve) -> None:
    """One -n 2 session, with eight in flight: two workers one rollout at a time give a plain
    run's records in test_remote_style_workers_on_a_copy_give_the_same_records."""
    noisy = {}
    eight = ["--capevolve-concurrency", "8"]  # rollouts in flight per process
    modes = (("plain", []), ("plain-k8", eight), ("xdist-k8", ["-n", "2", *eight]))
    for mode, extra in modes:
        project = example("noisy_agent", dest=f"noisy_{mode}")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # sameness holds at any n
        result = capevolve(project, "improved", extra=extra)
        assert result.ret == 0
        noisy[mode] = projects.rollout_records(project)
    assert len(noisy["plain"]) == 40 * 2 * 2
    for mode, _ in modes[1:]:
        assert noisy[mode] == noisy["plain"], mode


def test_trial_seeds_are_common_random_numbers(example, projects, capevolve) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    capevolve(project, "copy")
    records = projects.rollout_records(project)
    assert {key[3] for key in records} == {0, 1}
    for (_split, _task, _tag, trial), record in records.items():
        assert record["seed"] == 100 + trial


def test_remote_style_workers_on_a_copy_give_the_same_records(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    """The remote recipe of docs/how-to/remote-workers.md, as written: the user copies the project, each gateway's
    chdir points at the copy, and the workers load spec and adapter from there (no deprecated --rsyncdir). With 8
    rollouts in flight per worker under -n 2: test_records_identical_with_and_without_xdist."""
    local = example("toy_calc", dest="local/toy_calc")
    capevolve(local, "careful")
    project = example("toy_calc", dest="origin/toy_calc")
    copy = pytester.path / "remote" / "toy_calc"
    shutil.copytree(project, copy)
    marker = '\nfrom pathlib import Path as _P\n_P(__file__).with_name("loaded_here").touch()\n'
    (copy / "adapter.py").write_text((copy / "adapter.py").read_text() + marker)
    result = capevolve(project, "careful", extra=["--tx", f"2*popen//chdir={copy}", "-d"])
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert (copy / "loaded_here").is_file()  # the workers ran the copy's adapter
    assert not (project / "loaded_here").exists()
    assert projects.rollout_records(project) == projects.rollout_records(local)
    # a gateway pointed at a folder with no copy is refused before anything is planned
    empty = pytester.path / "empty"
    empty.mkdir()
    result = capevolve(project, "careful", tags=["careful2"], extra=["--tx", f"1*popen//chdir={empty}", "-d"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--tx 1[*]popen//chdir={empty}: * holds no copy of the project*"])


def test_a_gate_on_remote_style_workers_pays_its_null_controls_from_the_copy(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    """The remote recipe before a first gate: the gate session registers its null controls after the copy
    was made, so the copy holds no snapshot of theirs; a null is the best's bytes, which the copy holds
    (the seed's folder, or the best's snapshot). Every null rollout was an infra error (the copy of
    'seed-null1' hashed as an empty folder), so the nulls were indecisive, the candidate judged without
    a noise floor, and the session exited 12."""
    project = example("toy_calc", dest="origin/toy_calc")
    copy = pytester.path / "remote" / "toy_calc"
    shutil.copytree(project, copy)
    result = capevolve(project, "careful", gate=True, extra=["--tx", f"2*popen//chdir={copy}", "-d"])
    out = result.stdout.str()
    assert "differs from the controller's" not in out
    assert result.ret in (0, 10), out  # decided, not an infra failure
    run_dir = projects.run_dir(project)
    for null in ("seed-null1", "seed-null2"):
        verdict = json.loads((run_dir / "verdicts" / f"{null}.json").read_text())
        assert verdict["n_tasks"] > 0 and verdict["decision"] != "indecisive", null


def test_a_stale_copy_on_a_worker_is_named_once_and_recopying_advised(
    pytester: pytest.Pytester, example, capevolve
) -> None:
    project = example("toy_calc", dest="origin/toy_calc")
    copy = pytester.path / "remote" / "toy_calc"
    shutil.copytree(project, copy)
    prompt = copy / "candidates/careful/prompt.md"
    prompt.write_text(prompt.read_text() + "An edit only the copy has.\n")
    result = capevolve(project, "careful", extra=["--tx", f"1*popen//chdir={copy}", "-d"])
    out = result.stdout.str()
    assert "changed after the session started" not in out
    refused = [line for line in result.stdout.lines if "differs from the controller's" in line]
    assert len(refused) == 1, out  # every rollout of the tag refused, said once (not per rollout)
    assert f"this worker's copy of tag 'careful' at {copy / 'candidates/careful'} differs" in refused[0]
    assert refused[0].endswith("copy the project again") and " 11 more with the same reason: " in refused[0]
    result.stdout.fnmatch_lines(
        [
            "*missing; copy the project to the workers again, then to complete only those, run:",
            "  pytest *--capevolve-run-id *",
        ]
    )


def test_different_bytes_under_an_existing_tag_are_refused(example, capevolve) -> None:
    project = example("toy_calc")
    careful = project / "candidates/careful"
    assert capevolve(project, careful).ret == 0
    (careful / "prompt.md").write_text((careful / "prompt.md").read_text() + "Mind the sign.\n")
    result = capevolve(project, careful)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*tag 'careful' was evaluated in run * with different bytes*--capevolve-tag*"]
    )
    # a new tag for the new bytes is accepted, and pays only for the new tag
    again = capevolve(project, careful, tags=["careful2"])
    assert again.ret == 0
    again.stdout.fnmatch_lines(["rollouts: 12 paid, 12 reused*"])


def test_a_changed_seed_in_a_run_names_a_new_run_and_a_new_run_measures_it(
    toy_calc_baseline, capevolve
) -> None:
    """Neither --capevolve-tag nor --capevolve-rerun gives the seed new bytes: the refusal names
    the way that does."""
    project = toy_calc_baseline
    prompt = project / "capability" / "prompt.md"
    prompt.write_text(prompt.read_text() + "Mind the sign.\n")
    for extra in ([], ["--capevolve-rerun"]):
        result = capevolve(project, extra=extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            ["*the seed was evaluated in run * with different bytes*--capevolve-new-run*"]
        )
        assert "--capevolve-tag" not in result.stderr.str()
    again = capevolve(project, extra=["--capevolve-new-run"])
    assert again.ret == 0, again.stderr.str()


def test_rerun_evaluates_under_a_fresh_tag(toy_calc_baseline, projects, capevolve) -> None:
    project = toy_calc_baseline
    result = capevolve(project, extra=["--capevolve-rerun"])
    assert result.ret == 0
    result.stdout.fnmatch_lines(["seed-r2 *12*", "rollouts: 12 paid, 12 reused*"])
    tags = {k[2] for k in projects.rollout_records(project)}
    assert tags == {"seed", "seed-r2"}


def test_test_split_is_refused(example, capevolve) -> None:
    project = example("toy_calc")
    result = capevolve(project, extra=["--capevolve-split", "test"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test split is sealed*--capevolve-finalize*"])
    assert not (project / ".capevolve").exists() or not list((project / ".capevolve").rglob("rollouts"))


def _open_files() -> list[str]:
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return links
