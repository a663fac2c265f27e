"""The session-kind hook and the extension hooks, end to end: a project's conftest.py wraps
the default kind through ``pytest_capevolve_make_session`` and sees every verdict written and
every decision booked, on the controller only (with and without xdist)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CONFTEST = '''
import json
import pathlib

CALLS = pathlib.Path(__file__).with_name("hook_calls.jsonl")


def _log(**entry):
    with CALLS.open("a") as calls:
        calls.write(json.dumps(entry) + "\\n")


class Counted:
    """The default kind, wrapped: every start is logged."""

    def __init__(self, kind):
        self.kind, self.name = kind, kind.name

    def asked(self, config, split):
        return self.kind.asked(config, split)

    def start(self, config, spec, pool_ids, split):
        _log(hook="start", kind=self.name)
        return self.kind.start(config, spec, pool_ids, split)


def pytest_capevolve_make_session(config, default, kinds):
    _log(hook="make_session", kind=default.name, kinds=sorted(kinds))
    return Counted(default)


def pytest_capevolve_verdict_written(config, verdict, path):
    on_disk = json.loads(path.read_text()) == verdict
    _log(hook="verdict_written", tag=verdict["tag"], decision=verdict["decision"], on_disk=on_disk)


def pytest_capevolve_decision_booked(config, decision):
    _log(hook="decision_booked", tag=decision["tag"], decision=decision["decision"])
'''


def _calls(folder: Path) -> list[dict]:
    path = folder / "hook_calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.fixture
def gated_project(example, projects, pytester: pytest.Pytester) -> Path:
    project = example("noisy_agent")
    shutil.rmtree(project / "microcases")  # the gate's rule, not a microcase, decides here
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # the hooks fire alike at any n
    pytester.makeconftest(CONFTEST)
    return project


def test_make_session_wraps_the_default_kind_and_hooks_see_verdicts_and_bookings(
    gated_project, pytester, capevolve, xdist_args
):
    result = capevolve(gated_project, "improved", gate=True, extra=xdist_args)
    assert result.ret == 0, result.stdout.str()
    calls = _calls(pytester.path)
    kinds = ["evaluate", "finalize", "grow", "screen", "sequential"]
    assert [c for c in calls if c["hook"] in ("make_session", "start")] == [
        {"hook": "make_session", "kind": "evaluate", "kinds": kinds},
        {"hook": "start", "kind": "evaluate"},
    ]
    written = [(c["tag"], c["decision"], c["on_disk"]) for c in calls if c["hook"] == "verdict_written"]
    assert written == [
        ("seed-null1", "reject", True),
        ("seed-null2", "reject", True),
        ("improved", "accept", True),
    ]
    booked = [(c["tag"], c["decision"]) for c in calls if c["hook"] == "decision_booked"]
    assert booked == [("improved", "accept")]


def test_commit_none_writes_verdicts_and_books_nothing(gated_project, pytester, capevolve):
    result = capevolve(gated_project, "copy", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret == 10, result.stdout.str()
    calls = _calls(pytester.path)
    assert [c["tag"] for c in calls if c["hook"] == "verdict_written"] == ["seed-null1", "seed-null2", "copy"]
    assert not [c for c in calls if c["hook"] == "decision_booked"]
