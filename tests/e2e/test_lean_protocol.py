"""The lean run protocol for rollout items (session/lean_protocol.py): the same outputs as
pytest's own protocol, for less.

Each comparison runs the same project twice — as shipped, and with ``-p no:capevolve-protocol``
(pytest's protocol for every item) — and compares what a user and the run dir see: the terminal
(count line, ``-rA`` with captured output and logs, ``--durations``), the ``--junitxml`` file and
the rollout records. A conftest records each rollout's setup and teardown reports, so the cases
also fail if the lean protocol was not used at all (its setup and teardown ran nothing: no
duration) or was used for an item it must leave to pytest (a marked one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from session_outputs import junit_testcases, normalized

# '+' tasks print and log a warning (both captured: -rA and junit_logging=all show them)
NOISY = """
import logging

class NoisyAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if "+" in task.input:
            print(f"adding {task.input}")
            logging.getLogger("noisy").warning("logged %s", task.input)
        return super().run_target(task, ctx, seed=seed)
"""

# q01's items carry a user's marker (pytest's protocol for them), q07's an xfail mark that does
# not run them (pytest's setup decides that, in both modes), q12's an xfail mark added as they
# run (the call's report decides); every setup/teardown report's duration is written down
CONFTEST = """
import json, os
from pathlib import Path
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "flagged: a user's marker on some rollout items")

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("q01["):
            item.add_marker("flagged")
        if item.name.startswith("q07["):
            item.add_marker(pytest.mark.xfail(run=False, reason="a user's xfail mark"))

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.name.startswith("q12["):  # a mark added as the item runs: pytest's report says XPASS
        item.add_marker(pytest.mark.xfail(reason="marked as it ran"))
    return (yield)

def pytest_runtest_logreport(report):
    if report.when != "call" and not getattr(report, "node", None):  # the process that ran it
        with open(Path(os.environ["PHASES_DIR"], f"{os.getpid()}.jsonl"), "a") as out:
            out.write(json.dumps([report.nodeid.split("::")[-1], report.when, report.duration]) + "\\n")
"""


def run_both(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch, extra: list[str]
) -> dict[str, tuple[pytest.RunResult, Path, Path, dict[str, list[float]]]]:
    """The session as shipped ("lean") and with pytest's protocol ("full"): each run's result,
    project, junit file, and the setup/teardown durations of each rollout (item name → list)."""
    pytester.makeconftest(CONFTEST)
    runs = {}
    for mode, off in (("lean", []), ("full", ["-p", "no:capevolve-protocol"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, NOISY, "adapter.py:NoisyAdapter")
        phases_dir = pytester.path / f"phases-{mode}"
        phases_dir.mkdir()
        monkeypatch.setenv("PHASES_DIR", str(phases_dir))
        junit = project / "junit.xml"
        args = [*extra, *off, "-rA", f"--junitxml={junit}", "-o", "junit_logging=all"]
        result = capevolve(project, "careful", extra=args)
        assert result.ret == 12, result.stdout.str()  # q07's rollouts are missing
        durations: dict[str, list[float]] = {}
        for path in phases_dir.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                name, _when, duration = json.loads(line)
                durations.setdefault(name, []).append(duration)
        runs[mode] = (result, project, junit, durations)
    return runs


def test_the_lean_protocol_shows_what_pytests_protocol_shows(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    extra = ["--durations=0", "--durations-min=0"]
    runs = run_both(pytester, example, projects, capevolve, monkeypatch, extra)
    (lean, lean_project, lean_xml, lean_phases), (full, full_project, full_xml, full_phases) = (
        runs["lean"],
        runs["full"],
    )

    # the terminal: the same lines; --durations lists every phase, ordered by a clock
    lean_lines, full_lines = normalized(lean, "lean"), normalized(full, "full")
    start = next(i for i, line in enumerate(full_lines) if "slowest durations" in line)
    end = start + 1 + 22 * 3 + 2 * 2  # 22 rollouts ran (setup/call/teardown), 2 stopped at setup
    assert sorted(lean_lines[start:end]) == sorted(full_lines[start:end])
    # (the command that completes the missing rollouts differs: it repeats each run's own flags)
    assert [line for line in lean_lines[:start] + lean_lines[end:] if not line.startswith("  pytest ")] == [
        line for line in full_lines[:start] + full_lines[end:] if not line.startswith("  pytest ")
    ]
    outcomes = lean.parseoutcomes()
    assert outcomes == full.parseoutcomes() and (outcomes["passed"], outcomes["failed"]) == (11, 9)
    assert outcomes["xfailed"] == 2  # q07's xfail mark, evaluated by pytest's setup
    assert outcomes["xpassed"] == 2  # q12's, added as they ran
    assert sum(line.startswith("PASSED ") for line in lean_lines) == 11  # -rA lists each
    assert sum("Captured stdout call" in line for line in lean_lines) == 8  # the '+' tasks' prints
    assert sum("Captured log call" in line for line in lean_lines) == 8  # and their logs
    assert sum(" logged " in line for line in lean_lines) == 8
    cases = junit_testcases(lean_xml, "lean")
    assert cases == junit_testcases(full_xml, "full") and len(cases) == 24
    texts = [text for _attrs, _props, children in cases for _tag, _a, text in children]
    assert sum("adding " in t for t in texts) == 8 and sum(" logged " in t for t in texts) == 8
    assert projects.rollout_records(lean_project) == projects.rollout_records(full_project)
    assert len(projects.rollout_records(lean_project)) == 22

    # the lean protocol ran the unmarked rollouts (their setup and teardown ran nothing), and
    # left the marked ones to pytest; pytest's protocol times every phase it ran
    unmarked = [name for name in lean_phases if not name.startswith(("q01[", "q07["))]
    assert len(unmarked) == 20 and all(lean_phases[name] == [0.0, 0.0] for name in unmarked)
    assert all(0.0 not in lean_phases[name] for name in lean_phases if name.startswith("q01["))
    assert all(0.0 not in durations for durations in full_phases.values())


def test_with_xdist_workers_forward_the_same_reports(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    runs = run_both(pytester, example, projects, capevolve, monkeypatch, ["-n", "2"])
    (lean, lean_project, lean_xml, lean_phases), (full, full_project, full_xml, full_phases) = (
        runs["lean"],
        runs["full"],
    )

    outcomes = lean.parseoutcomes()
    assert outcomes == full.parseoutcomes() and (outcomes["passed"], outcomes["failed"]) == (11, 9)
    lean_lines, full_lines = normalized(lean, "lean"), normalized(full, "full")
    prefixes = (
        "PASSED ",
        "FAILED ",
        "XFAIL ",
        "XPASS ",
        "seed ",
        "careful ",
        "rollouts: ",
        "adding ",
        "WARNING ",
    )
    for prefix in prefixes:  # lines compared as sets: the order they arrive in varies
        chosen = sorted(line for line in lean_lines if line.startswith(prefix))
        assert chosen == sorted(line for line in full_lines if line.startswith(prefix)) and chosen
    cases = sorted(junit_testcases(lean_xml, "lean"))
    assert cases == sorted(junit_testcases(full_xml, "full")) and len(cases) == 24
    assert projects.rollout_records(lean_project) == projects.rollout_records(full_project)
    # the workers ran the unmarked rollouts the lean way; -p no:capevolve-protocol reached them too
    unmarked = [name for name in lean_phases if not name.startswith(("q01[", "q07["))]
    assert len(unmarked) == 20 and all(lean_phases[name] == [0.0, 0.0] for name in unmarked)
    assert len(full_phases) == 24 and all(0.0 not in durations for durations in full_phases.values())


def test_with_no_plugin_reading_them_no_setup_or_teardown_report_is_made(
    pytester: pytest.Pytester, example, projects, capevolve
) -> None:
    """Only the terminal, logging and capevolve watch reports: the call's report is the one made for a
    rollout item (pytest's protocol makes three), and the terminal (-rA with captured output and logs),
    the outcomes and the records are the same."""
    runs = {}
    for mode, off in (("lean", []), ("full", ["-p", "no:capevolve-protocol"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, NOISY, "adapter.py:NoisyAdapter")
        result = capevolve(project, "careful", extra=[*off, "-rA"])
        assert result.ret == 0, result.stdout.str()
        phases: dict[str, list[str]] = {}
        for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
            phases.setdefault(report.nodeid, []).append(report.when)
        runs[mode] = (result, project, phases)
    (lean, lean_project, lean_phases), (full, full_project, full_phases) = runs["lean"], runs["full"]
    assert len(lean_phases) == len(full_phases) == 24
    assert all(whens == ["call"] for whens in lean_phases.values())
    assert all(whens == ["setup", "call", "teardown"] for whens in full_phases.values())
    assert normalized(lean, "lean") == normalized(full, "full")
    assert sum("Captured stdout call" in line for line in normalized(lean, "lean")) == 8
    assert lean.parseoutcomes() == full.parseoutcomes()
    assert projects.rollout_records(lean_project) == projects.rollout_records(full_project)


SETUP_HOOK = """
import os
from pathlib import Path

def pytest_runtest_setup(item):
    with open(Path(os.environ["SETUP_LOG"]), "a") as out:
        out.write(item.name + "\\n")
"""


def test_a_projects_own_setup_hook_is_called_for_every_rollout(
    pytester: pytest.Pytester, example, capevolve, monkeypatch
) -> None:
    """A plugin the lean protocol does not know implements a hook it skips: pytest's protocol,
    so the hook is called as before."""
    pytester.makeconftest(SETUP_HOOK)
    log = pytester.path / "setup.log"
    monkeypatch.setenv("SETUP_LOG", str(log))
    result = capevolve(example("toy_calc"), "careful", extra=["--maxfail=3"])
    names = log.read_text().splitlines()
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 3 and len(names) == outcomes["failed"] + outcomes["passed"]
    assert len(set(names)) == len(names)


def test_maxfail_stops_both_protocols_at_the_same_rollout(example, projects, capevolve) -> None:
    results = {}
    for mode, off in (("lean", []), ("full", ["-p", "no:capevolve-protocol"])):
        project = example("toy_calc", dest=mode)
        results[mode] = (capevolve(project, "careful", extra=["--maxfail=2", *off]), project)
    (lean, lean_project), (full, full_project) = results["lean"], results["full"]
    # the command that completes the rest repeats the options typed: the full one's -p too
    full_lines = [line.replace(" -p no:capevolve-protocol", "") for line in normalized(full, "full")]
    assert normalized(lean, "lean") == full_lines
    assert lean.parseoutcomes()["failed"] == 2 and "stopping after 2 failures" in lean.stdout.str()
    records = projects.rollout_records(lean_project)
    assert records == projects.rollout_records(full_project) and 2 <= len(records) < 24


SKIPPING_CONFTEST = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("q05["):
            item.add_marker(pytest.mark.skip(reason="a user's skip mark"))
        if item.name.startswith("q10["):
            item.add_marker(pytest.mark.skipif(True, reason="a user's skipif mark"))
"""


def test_skip_marks_on_rollout_items_skip_them(pytester: pytest.Pytester, example, capevolve) -> None:
    pytester.makeconftest(SKIPPING_CONFTEST)
    result = capevolve(example("toy_calc"), "careful", extra=["-rs"])
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert result.ret == 12, out  # the skipped rollouts are owed still: missing
    assert result.parseoutcomes()["skipped"] == 4  # q05 and q10, for the seed and the candidate
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED [")]
    assert any("a user's skip mark" in line for line in skipped)
    assert any("a user's skipif mark" in line for line in skipped)


PHASE_LOG = """
import json, os
from pathlib import Path

def pytest_runtest_logreport(report):
    if report.when == "setup":
        with open(Path(os.environ["PHASES_LOG"]), "a") as out:
            out.write(json.dumps(report.duration) + "\\n")
"""


def test_pytest_probability_installed_leaves_rollouts_the_lean_protocol(
    pytester: pytest.Pytester, example, capevolve, monkeypatch
) -> None:
    """pytest-probability (a peer in benchmarks/peers.py, so often installed beside us) wraps
    ``pytest_runtest_makereport`` for its own items only: rollouts keep the lean protocol (their
    setup ran nothing: no duration)."""
    pytest.importorskip("pytest_probability")
    pytester.makeconftest(PHASE_LOG)
    log = pytester.path / "phases.log"
    monkeypatch.setenv("PHASES_LOG", str(log))
    result = capevolve(example("toy_calc"))
    assert "probability" in result.stdout.str()  # the plugins line: it was loaded
    durations = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(durations) == 12 and set(durations) == {0.0}
