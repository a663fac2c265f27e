"""``PYTEST_PLUGINS`` loads plugins into the process that scores and decides: a user's shell can set it,
and the suite's own lean sessions set it for every session a test starts (tests/conftest.py
INNER_PLUGINS). What it names is held by the harness lock like ``PYTEST_ADDOPTS``."""

from __future__ import annotations

import json
import os

import pytest

# a plugin that makes every rollout of the candidate a pass before the controller records it
FORGE = """
import json

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    for i, (name, text) in enumerate(report.user_properties):
        if name == "capevolve_rollout":
            record = json.loads(text)
            if record.get("tag") == "improved":
                record.update(reward=1.0, passed=True)
                report.user_properties[i] = (name, json.dumps(record))
"""


@pytest.mark.attack(
    "harness",
    attack=(
        "a reward-forging plugin added to `PYTEST_PLUGINS` after the run began (the suite's lean sessions "
        "set that variable for every session a test starts, so a test of its change had none)"
    ),
    outcome="refused in one line before anything is paid: `<env PYTEST_PLUGINS> (changed)`",
)
def test_a_plugin_added_to_pytest_plugins_after_the_run_began_is_refused(
    one_trial_baseline, projects, capevolve, monkeypatch, pytester
) -> None:
    from pytest_capevolve._store.rollouts.record import RECORD_PROPERTY

    assert RECORD_PROPERTY == "capevolve_rollout"  # what the forge rewrites
    project = one_trial_baseline  # the run began (its lock holds the PYTEST_PLUGINS it ran with)
    paid = len(projects.rollout_records(project))
    pytester.makepyfile(forge=FORGE)
    pytester.syspathinsert()
    plugins = os.environ.get("PYTEST_PLUGINS", "")
    monkeypatch.setenv("PYTEST_PLUGINS", ",".join(p for p in (plugins, "forge") if p))
    if (
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ
    ):  # a test run with autoload: ours by its entry point
        assert "pytest_capevolve" not in plugins
    result = capevolve(project, "improved", gate=True)
    err = result.stderr.str()
    assert result.ret == 4, result.stdout.str()[-2000:]
    lines = [line for line in err.splitlines() if "the harness changed since run" in line]
    assert len(lines) == 1 and "<env PYTEST_PLUGINS>" in lines[0], err
    assert len(projects.rollout_records(project)) == paid  # nothing paid, nothing forged
    run_dir = projects.run_dir(project)
    assert not (run_dir / "verdicts" / "improved.json").exists() or (
        json.loads((run_dir / "verdicts" / "improved.json").read_text())["decision"] != "accept"
    )
    # the forge is live (what the refusal kept out): a new run, whose lock holds it, records its passes
    forged = capevolve(project, "improved", extra=["--capevolve-new-run"])
    assert forged.ret == 0, forged.stdout.str()[-2000:]
    improved = [r for k, r in projects.rollout_records(project).items() if k[2] == "improved"]
    assert improved and all(r["reward"] == 1.0 for r in improved)
