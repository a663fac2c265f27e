"""End to end: `pytest --capevolve-run` on the bundled examples, with and without xdist."""

from __future__ import annotations

import json

import pytest

from conftest import copy_example, rollout_records, run_dir


def test_items_ids_and_count(pytester: pytest.Pytester, xdist_args: list[str]) -> None:
    project = copy_example(pytester, "toy_calc")
    result = pytester.runpytest(
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(project / "candidates/careful"),
        "--collect-only",
        "-q",
        *xdist_args,
    )
    splits = json.loads((run_dir(project) / "splits.json").read_text())
    val = splits["val"]
    assert len(val) == 12
    if not xdist_args:  # the xdist controller does not list collected items
        result.stdout.fnmatch_lines([f"toy_calc/capevolve.yaml::val::{val[0]}[[]seed-t0[]]"])
        ids = [ln for ln in result.stdout.lines if "capevolve.yaml::val::" in ln]
        assert len(ids) == 12 * 2
        assert ids[:2] == [
            f"toy_calc/capevolve.yaml::val::{val[0]}[seed-t0]",
            f"toy_calc/capevolve.yaml::val::{val[0]}[careful-t0]",
        ]


def test_run_persists_records_and_resume_pays_nothing(
    pytester: pytest.Pytester, xdist_args: list[str]
) -> None:
    project = copy_example(pytester, "toy_calc")
    args = [
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(project / "candidates/careful"),
    ]
    first = pytester.runpytest(*args, *xdist_args)
    assert first.ret == 0  # failing tasks are not a failing session
    first.assert_outcomes(passed=14, failed=10)
    first.stdout.fnmatch_lines(
        ["*seed*val*12*1*0.333*", "*careful*val*12*1*0.833*", "rollouts: 24 paid, 0 reused*"]
    )
    records = rollout_records(project)
    assert len(records) == 24
    assert {r["seed"] for r in records.values()} == {0}

    second = pytester.runpytest(*args, *xdist_args)
    assert second.ret == 0
    second.stdout.fnmatch_lines(["rollouts: 0 paid, 24 reused*"])
    state = json.loads((run_dir(project) / "state.json").read_text())
    assert state["spent"]["metric_calls"] == 24
    assert rollout_records(project) == records


def test_records_identical_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    noisy = {}
    for mode, extra in (("plain", []), ("xdist", ["-n", "2"])):
        project = copy_example(pytester, "noisy_agent", dest=f"noisy_{mode}")
        result = pytester.runpytest(
            "--capevolve-run",
            str(project),
            "--capevolve-candidate",
            str(project / "candidates/improved"),
            "-p",
            "no:cacheprovider",
            *extra,
        )
        assert result.ret == 0
        noisy[mode] = rollout_records(project)
    assert len(noisy["plain"]) == 40 * 5 * 2
    assert noisy["plain"] == noisy["xdist"]


def test_trial_seeds_are_common_random_numbers(pytester: pytest.Pytester) -> None:
    project = copy_example(pytester, "noisy_agent")
    pytester.runpytest(
        "--capevolve-run", str(project), "--capevolve-candidate", str(project / "candidates/copy")
    )
    records = rollout_records(project)
    for (_split, _task, _tag, trial), record in records.items():
        assert record["seed"] == 100 + trial


def test_remote_style_workers_on_a_copy_give_the_same_records(pytester: pytest.Pytester) -> None:
    local = copy_example(pytester, "toy_calc", dest="local/toy_calc")
    pytester.runpytest(
        "--capevolve-run", str(local), "--capevolve-candidate", str(local / "candidates/careful")
    )
    project = copy_example(pytester, "toy_calc", dest="origin/toy_calc")
    remote = pytester.path / "remote"
    remote.mkdir()
    result = pytester.runpytest(
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(project / "candidates/careful"),
        "--tx",
        f"2*popen//chdir={remote}",
        "-d",
        "--rsyncdir",
        str(project),
    )
    assert result.ret == 0, result.stdout.str()
    assert (remote / "toy_calc" / "adapter.py").is_file()  # the workers ran on the copy
    assert rollout_records(project) == rollout_records(local)


def test_different_bytes_under_an_existing_tag_are_refused(pytester: pytest.Pytester) -> None:
    project = copy_example(pytester, "toy_calc")
    careful = project / "candidates/careful"
    assert pytester.runpytest("--capevolve-run", str(project), "--capevolve-candidate", str(careful)).ret == 0
    (careful / "prompt.md").write_text((careful / "prompt.md").read_text() + "Mind the sign.\n")
    result = pytester.runpytest("--capevolve-run", str(project), "--capevolve-candidate", str(careful))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*tag 'careful' was evaluated in run * with different bytes*--capevolve-tag*"]
    )
    # a new tag for the new bytes is accepted, and pays only for the new tag
    again = pytester.runpytest(
        "--capevolve-run",
        str(project),
        "--capevolve-candidate",
        str(careful),
        "--capevolve-tag",
        "careful2",
    )
    assert again.ret == 0
    again.stdout.fnmatch_lines(["rollouts: 12 paid, 12 reused*"])


def test_rerun_evaluates_under_a_fresh_tag(pytester: pytest.Pytester) -> None:
    project = copy_example(pytester, "toy_calc")
    pytester.runpytest("--capevolve-run", str(project))
    result = pytester.runpytest("--capevolve-run", str(project), "--capevolve-rerun")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["seed-r2 *12*", "rollouts: 12 paid, 12 reused*"])
    tags = {k[2] for k in rollout_records(project)}
    assert tags == {"seed", "seed-r2"}


def test_test_split_is_refused(pytester: pytest.Pytester) -> None:
    project = copy_example(pytester, "toy_calc")
    result = pytester.runpytest("--capevolve-run", str(project), "--capevolve-split", "test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test split is sealed*--capevolve-finalize*"])
    assert not (project / ".capevolve").exists() or not list((project / ".capevolve").rglob("rollouts"))
