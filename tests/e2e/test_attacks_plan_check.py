"""Issue 24, the record's third red team: a plugin outside the project changed what a session
ran after we collected it, and part of the sealed split was paid (170 of 240 test rollouts)
before the finalize found the rest missing.

Every plugin here is a module outside the project folder, loaded with ``-p`` (what the harness
lock lets through: it refuses a ``-p`` module inside the project). The items that survive every
plugin's hooks are compared with the session's plan before any rollout is paid
(:mod:`pytest_capevolve._session.plan_check`): a finalize or a gate runs its whole plan, each
rollout once, in the plan's order, or nothing.
"""

from __future__ import annotations

import os
import textwrap

import pytest
from run_log import events as _events
from run_log import one_line as _one_line

PLUGINS = {
    # drops the n0* rollouts and tells nobody
    "drops_silently": """
        def pytest_collection_modifyitems(config, items):
            items[:] = [i for i in items if "::n0" not in i.nodeid]
    """,
    # drops them the way pytest's own -k does: announced through pytest_deselected
    "drops_announced": """
        def pytest_collection_modifyitems(config, items):
            gone = [i for i in items if "::n0" in i.nodeid]
            config.hook.pytest_deselected(items=gone)
            items[:] = [i for i in items if i not in gone]
    """,
    # runs the first rollout twice
    "duplicates": """
        def pytest_collection_modifyitems(config, items):
            items.append(items[0])
    """,
    # runs the planned rollouts backwards
    "reorders": """
        def pytest_collection_modifyitems(config, items):
            items.reverse()
    """,
    # adds an item of its own, that attaches what looks like a rollout record
    "adds_a_fake": """
        import pytest

        class Fake(pytest.Item):
            def runtest(self):
                pass

        def pytest_collection_modifyitems(session, config, items):
            items.append(Fake.from_parent(session, name="fake"))
    """,
    # edits the plan object after it was made: n0* look persisted, so they are not collected
    "edits_the_plan": """
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            from pytest_capevolve._items.nodes import CONTEXT_KEY
            plan = config.stash[CONTEXT_KEY].plan
            plan.persisted = set(plan.persisted) | {
                k for k in plan.all_keys() if k.task_id.startswith("n0")
            }
    """,
    # drops them later, from its own run-loop wrapper, once collection has finished
    "drops_in_the_run_loop": """
        import pytest

        @pytest.hookimpl(wrapper=True)
        def pytest_runtestloop(session):
            session.items[:] = [i for i in session.items if "::n0" not in i.nodeid]
            return (yield)
    """,
    # on each xdist worker, after its ids went to the controller: index 1 runs item 0 again
    "repeats_on_the_worker": """
        import pytest

        @pytest.hookimpl(wrapper=True)
        def pytest_runtestloop(session):
            if hasattr(session.config, "workerinput"):
                session.items[1] = session.items[0]
            return (yield)
    """,
    # announces a deselection and removes nothing: everything still runs
    "announces_only": """
        def pytest_collection_modifyitems(config, items):
            config.hook.pytest_deselected(items=[i for i in items if "::n0" in i.nodeid])
    """,
}


@pytest.fixture
def outside_plugin(pytester, monkeypatch):
    """``outside_plugin(name) -> ["-p", module]``: one of :data:`PLUGINS` as a module in a folder
    beside the project (never inside it), importable here and in xdist workers."""
    folder = pytester.path / "elsewhere"
    folder.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(folder))
    kept = os.environ["PYTHONPATH"]  # the suite's child_secret/ (tests/conftest.py) stays on it
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), kept]))

    def write(name: str) -> list[str]:
        (folder / f"{name}.py").write_text(textwrap.dedent(PLUGINS[name]))
        return ["-p", name]

    return write


def _baseline(one_trial_baseline, projects):
    """noisy_agent at one trial after its baseline (a copy of one build per process)."""
    return one_trial_baseline, projects.run_dir(one_trial_baseline)


def _refused(result, *expected: str) -> str:
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    line = _one_line(result.stderr.str())
    assert "are not this session's plan" in line and "refused before any rollout was paid" in line, line
    for part in expected:
        assert part in line, line
    return line


@pytest.mark.attack(
    "session-runs",
    attack=(
        "a `-p` plugin outside the project drops finalize items in `pytest_collection_modifyitems`, "
        "silently or announced through `pytest_deselected` (170 of 240 test rollouts paid before the "
        "finalize found the rest missing)"
    ),
    outcome="refused in one line before any test rollout; the next finalize without it scores once",
)
@pytest.mark.attack(
    "session-runs",
    attack=(
        "a plugin that repeats an item, reverses the items, adds an item of its own, edits the plan "
        "object (`plan.persisted`) in a later `pytest_configure`, or drops items from its run-loop "
        "wrapper after collection"
    ),
    outcome="refused in one line before any rollout, naming what differs",
)
@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        ("drops_silently", "planned rollouts not collected (first: 'test::n0"),
        ("drops_announced", "planned rollouts not collected"),
        ("duplicates", "collected more than once"),
        ("reorders", "in another order than the plan's"),
        ("adds_a_fake", "1 item(s) the plan does not hold (first: '<not a planned rollout item>"),
        ("edits_the_plan", "planned rollouts not collected (first: 'test::n0"),
        ("drops_in_the_run_loop", "planned rollouts not collected (first: 'test::n0"),
    ],
)
def test_a_plugin_that_changes_a_finalizes_items_is_refused_before_any_test_rollout(
    one_trial_baseline, projects, capevolve, outside_plugin, plugin, expected
):
    project, run_dir = _baseline(one_trial_baseline, projects)
    result = capevolve(project, finalize=True, extra=outside_plugin(plugin))
    _refused(result, "a finalize runs its whole plan", expected)
    assert not list((run_dir / "rollouts").glob("test/*.json"))  # nothing of the test split paid
    kinds = [e["kind"] for e in _events(run_dir)]
    assert "test_scored" not in kinds and not (run_dir / "seal.json").exists()
    again = capevolve(project, finalize=True)  # without the plugin: the whole test split, once
    assert again.ret == 0, again.stdout.str()[-2000:]
    assert [e["kind"] for e in _events(run_dir)].count("test_scored") == 1


@pytest.mark.attack(
    "session-runs",
    attack="the same plugin under `-n 2` (the controller collects nothing)",
    outcome="refused in one line from the workers' ids: nothing is scheduled",
)
def test_a_plugin_that_drops_a_finalizes_items_under_xdist_is_refused_before_any_test_rollout(
    one_trial_baseline, projects, capevolve, outside_plugin
):
    project, run_dir = _baseline(one_trial_baseline, projects)
    # in a child: xdist gives its workers the sys.path its controller started with
    extra = [*outside_plugin("drops_silently"), "-n", "2"]
    result = capevolve(project, finalize=True, extra=extra, subprocess=True)
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    line = _one_line(result.stderr.str())
    assert "the items collected on gw" in line and "planned rollouts not collected" in line, line
    assert not list((run_dir / "rollouts").glob("test/*.json"))
    assert not [e for e in _events(run_dir) if e["kind"] == "rollout" and e["split"] == "test"]


@pytest.mark.attack(
    "session-runs",
    attack="a plugin that only calls `config.hook.pytest_deselected`, removing nothing",
    outcome="held: every planned item runs, the finalize scores once",
)
def test_a_plugin_that_only_announces_a_deselection_changes_nothing(
    one_trial_baseline, projects, capevolve, outside_plugin
):
    project, run_dir = _baseline(one_trial_baseline, projects)
    result = capevolve(project, finalize=True, extra=outside_plugin("announces_only"))
    assert result.ret == 0, result.stdout.str()[-2000:]  # every planned item ran: nothing to refuse
    assert [e["kind"] for e in _events(run_dir)].count("test_scored") == 1


def _gate_noop(example, projects):
    project = example("noisy_agent")
    projects.one_trial_with_noop(project)
    return project


@pytest.mark.attack(
    "session-runs",
    attack=(
        "a plugin that drops the val tasks a candidate loses from its gate (the gate decided on the "
        "rest above `min_coverage`)"
    ),
    outcome="refused in one line before any rollout, no verdict",
)
def test_a_plugin_that_drops_a_gates_val_items_is_refused_before_any_rollout(
    example, projects, capevolve, outside_plugin
):
    project = _gate_noop(example, projects)
    result = capevolve(project, "noop", gate=True, extra=outside_plugin("drops_announced"))
    _refused(result, "a gate runs its whole plan", "planned rollouts not collected (first: 'val::n0")
    run_dir = projects.run_dir(project)
    assert not list((run_dir / "rollouts").rglob("*.json"))  # nothing paid
    assert not list((run_dir / "verdicts").glob("*.json"))  # nothing decided


@pytest.mark.attack(
    "session-runs",
    attack='`-k "not n07"`, `--deselect`, `-x`, `--maxfail` given to a gate',
    outcome=(
        "refused in one line before anything is claimed (grow and the screens choose their subsets in "
        "their own planning)"
    ),
)
@pytest.mark.parametrize(
    ("selection", "named"),
    [
        (["-k", "not n07"], "-k 'not n07'"),
        (["--deselect", "noisy_agent/capevolve.yaml::val::n07[noop-t0]"], "--deselect"),
        (["-x"], "-x/--maxfail"),  # named as typed, not only as pytest spells the option
        (["--maxfail", "3"], "--maxfail"),
    ],
)
def test_a_selection_given_to_a_gate_is_refused_before_anything_is_claimed(
    example, projects, capevolve, selection, named
):
    project = _gate_noop(example, projects)
    result = capevolve(project, "noop", gate=True, extra=selection)
    assert result.ret == 4, result.stdout.str()[-2000:]
    line = _one_line(result.stderr.str())
    assert "a gate decides on the whole val set of its plan" in line and named in line, line
    runs = project / ".capevolve" / "runs"
    assert not list(runs.rglob("rollouts/**/*.json")) if runs.exists() else True


@pytest.mark.attack(
    "session-runs",
    attack="`--lf`, `--ff`, `-x` on a finalize",
    outcome="refused in one line before the seal is claimed",
)
def test_last_failed_failed_first_and_maxfail_on_a_finalize_are_refused_before_the_seal(
    one_trial_baseline, projects, capevolve, pytester
):
    project, run_dir = _baseline(one_trial_baseline, projects)
    for flags, named in ((["--lf"], "--last-failed"), (["--ff"], "--failed-first"), (["-x"], "-x/--maxfail")):
        result = pytester.runpytest("--capevolve-finalize", str(project), *flags)  # cacheprovider on
        assert result.ret == 4, result.stdout.str()[-2000:]
        line = _one_line(result.stderr.str())
        assert "a finalize runs the whole test plan" in line and named in line, line
    assert not [e for e in _events(run_dir) if e["kind"] in ("test_opened", "test_scored")]


@pytest.mark.attack(
    "session-runs",
    attack="a plugin that repeats an item of a session that decides nothing (paid twice)",
    outcome="refused in one line (such a session may drop and reorder, never gain or repeat)",
)
def test_a_plugin_that_duplicates_an_evaluations_item_is_refused(
    example, projects, capevolve, outside_plugin
):
    project = example("toy_calc")
    result = capevolve(project, extra=outside_plugin("duplicates"))
    _refused(result, "an evaluation runs only rollouts of its plan, each once", "collected more than once")
    assert not list((projects.run_dir(project) / "rollouts").rglob("*.json"))


@pytest.mark.attack(
    "session-runs",
    attack=(
        "`-p no:capevolve-plan-check` (a finalize with the dropping plugin paid 17 of 24 test "
        "rollouts), or any `-p no:capevolve-…` but the parts that only make a session faster "
        "(`-retention`, `-protocol`, `-heap`, `-fanout`, `-ahead`)"
    ),
    outcome="refused in one line before anything is planned",
)
def test_a_session_run_without_one_of_its_parts_is_refused_before_anything_is_planned(
    one_trial_baseline, projects, capevolve, outside_plugin
):
    """``-p no:capevolve-plan-check`` unregistered the check by its name: with the dropping
    plugin, a finalize paid 17 of its 24 test rollouts."""
    project, run_dir = _baseline(one_trial_baseline, projects)
    for part in ("capevolve-plan-check", "capevolve-persistence"):
        extra = [*outside_plugin("drops_silently"), "-p", f"no:{part}"]
        result = capevolve(project, finalize=True, extra=extra)
        assert result.ret == 4, result.stdout.str()[-2000:]
        line = _one_line(result.stderr.str())
        assert f"-p no:{part} would run the session without a part of its own" in line, line
    assert not list((run_dir / "rollouts").glob("test/*.json"))
    assert not [e for e in _events(run_dir) if e["kind"] in ("test_opened", "test_scored")]


@pytest.mark.attack(
    "session-runs",
    attack="`-n 2 --dist each` (every rollout paid once per worker)",
    outcome="refused in one line before anything is planned",
)
def test_dist_each_is_refused_before_anything_is_planned(example, projects, capevolve):
    """``-n 2 --dist each`` ran every rollout on both workers: each paid twice."""
    project = example("toy_calc")
    result = capevolve(project, extra=["-n", "2", "--dist", "each"])
    assert result.ret == 4, result.stdout.str()[-2000:]
    assert "--dist each runs every rollout on every worker" in _one_line(result.stderr.str())
    assert not (project / ".capevolve" / "runs").exists()


@pytest.mark.attack(
    "session-runs",
    attack="a worker's items edited after it sent their ids (index 1 runs item 0 again)",
    outcome=(
        "held to the plan where the record arrives: each owed rollout is recorded once, a record the "
        "plan does not owe is not recorded, and the finalize short of one scores nothing. Code in the "
        "process can still forge what it runs: see *whoever starts the gate process* above"
    ),
)
def test_a_rollout_repeated_on_a_worker_after_its_ids_were_checked_is_recorded_once(
    one_trial_baseline, projects, capevolve, outside_plugin
):
    """What the controller cannot see (a worker's items edited after it sent their ids): the
    records it receives are held to the plan, each owed rollout recorded once, and a finalize
    short of one scores nothing."""
    project, run_dir = _baseline(one_trial_baseline, projects)
    extra = [*outside_plugin("repeats_on_the_worker"), "-n", "2"]
    result = capevolve(project, finalize=True, extra=extra, subprocess=True)
    out = result.stdout.str()
    assert result.ret == 12, out[-3000:]
    assert "the test split was NOT scored" in out and "or one it recorded already: not recorded" in out, out[
        -3000:
    ]
    test_events = [
        (e["task_id"], e["tag"], e["trial"])
        for e in _events(run_dir)
        if e["kind"] == "rollout" and e["split"] == "test"
    ]
    assert len(test_events) == len(set(test_events))  # paid twice, recorded once
    assert "test_scored" not in [e["kind"] for e in _events(run_dir)]


@pytest.mark.attack(
    "session-runs",
    attack='`-k "not n07"`, `--deselect`, `-x`, `--maxfail` given to a gate',
    note="a `-m` that drops no rollout leaves a gate alone",
)
def test_a_mark_expression_that_deselects_no_rollout_leaves_a_gate_alone(example, projects, capevolve):
    """``addopts = -m "not slow"`` is common in a project's pytest configuration: rollouts carry
    no marks, so it drops none, and the gate decides (a ``-m`` that did drop one would be
    refused by the plan check)."""
    project = _gate_noop(example, projects)
    result = capevolve(project, "noop", gate=True, extra=["-m", "not slow", "--capevolve-commit", "none"])
    assert result.ret == 10, result.stdout.str()[-2000:]  # the no-op rejected, on its whole plan
    assert (projects.run_dir(project) / "verdicts" / "noop.json").is_file()
