"""``--junitxml`` for a capevolve session: flat properties per rollout, a testcase per verdict.

Controller only. A verdict's testcase (``capevolve.verdicts``) passes when accepted, fails when rejected and
errs when not judged; a null control's passes when not accepted."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from .._store.rollouts.record import RECORD_PROPERTY, record_from_report
from .outcome import SessionEnd

VERDICT_CLASSNAME = "capevolve.verdicts"
# Set by a finalize that scores test tasks another run of the project scored (acknowledged):
# every test rollout's testcase and the suite then carry the label.
TEST_REUSED = pytest.StashKey[str]()


# a rollout's flat properties: the record's fields, by their own name or the one named here
ROLLOUT_PROPERTIES = "split task tag trial seed reward cost infra_error feedback".split()
RECORD_FIELDS = {"task": "task_id", "cost": "cost_usd"}


def _blank_none(values: dict[str, object]) -> list[tuple[str, object]]:
    return [(name, "" if value is None else value) for name, value in values.items()]


# a verdict's properties, in this order: the verdict's fields by their own name, or worked out here
VERDICT_PROPERTIES = (
    "tag against decision basis mode n_tasks trials delta_mean se ci_low ci_high p_value bar coverage "
    "null_control reason".split()
)


def verdict_properties(verdict: Any, *, null_control: bool) -> list[tuple[str, object]]:
    low, high = (None, None) if verdict.ci is None else verdict.ci[:2]
    paired = verdict.coverage.get("paired")
    worked_out = {"ci_low": low, "ci_high": high, "coverage": paired, "null_control": null_control}
    fields = [(name, name in worked_out) for name in VERDICT_PROPERTIES]
    return _blank_none({name: worked_out[name] if ours else getattr(verdict, name) for name, ours in fields})


class JunitReport:
    def __init__(self, config: pytest.Config, end: SessionEnd) -> None:
        self.config = config
        self.end = end

    @pytest.hookimpl(tryfirst=True)  # before junitxml reads the teardown report's properties
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """junitxml writes the teardown report's properties: there the record becomes flat properties."""
        if report.when != "teardown":
            return
        record = record_from_report(report)
        if record is None:
            return
        others = [(name, value) for name, value in report.user_properties if name != RECORD_PROPERTY]
        reused = self.config.stash.get(TEST_REUSED, None) if record.split == "test" else None
        label = [("test_reused", reused)] if reused else []
        flat = _blank_none(
            {name: getattr(record, RECORD_FIELDS.get(name, name)) for name in ROLLOUT_PROPERTIES}
        )
        report.user_properties = [*others, *flat, *label]

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes the file
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from _pytest.junitxml import xml_key

        xml = self.config.stash.get(xml_key, None)
        outcome = self.end.outcome
        reused = self.config.stash.get(TEST_REUSED, None)
        if xml is not None and reused:
            xml.add_global_property("capevolve_test_reused", reused)
        if xml is None or not outcome.verdicts:
            return
        nulls = {v.tag for v in outcome.nulls}
        for verdict in outcome.verdicts:
            null_control = verdict.tag in nulls
            testcase = xml.node_reporter(f"capevolve::verdicts::{verdict.tag}")
            name = f"{verdict.tag} vs {verdict.against}" + (" (null control)" if null_control else "")
            testcase.attrs.update(classname=VERDICT_CLASSNAME, name=name)
            for key, value in verdict_properties(verdict, null_control=null_control):
                testcase.add_property(key, value)
            accepted = verdict.decision == "accept"
            if null_control:
                passed, tag = not accepted, "failure"
                message = f"calibration alarm: a null control was accepted: {verdict.reason}"
            else:
                passed = accepted
                tag = "failure" if verdict.decision == "reject" else "error"
                message = f"{verdict.decision}: {verdict.reason}"
            if passed:
                xml.add_stats("passed")
            else:
                node = ET.Element(tag, message=message, type=f"capevolve.{verdict.decision}")
                node.text = message
                testcase.append(node)
