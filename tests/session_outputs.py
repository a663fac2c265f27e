"""What two sessions that should look alike show, with what differs between any two runs (times,
the project folder's name, the run id) made equal: for the tests that hold an optimisation of the
run loop invisible (tests/e2e/test_lean_protocol.py, tests/e2e/test_retention.py)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest


def normalized(result: pytest.RunResult, project: str) -> list[str]:
    """The terminal with what differs between two identical sessions made equal: times, the
    project folder's name, the run id and object addresses."""
    lines = []
    for line in result.stdout.lines:
        line = re.sub(r"\d+\.\d+s", "Ts", line)
        # a rule's padding to the terminal's width: one '=' less after a session of 10 s or more
        line = re.sub(r"^([=_-])\1* (.*) \1+$", r"\1 \2 \1", line)
        line = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]+\b", "RUN", line)
        line = re.sub(
            r" at 0x[0-9a-f]+", " at ADDR", line
        )  # reprs in a traceback (pytest 8.1 shows its frames)
        # the folder inside a path, or at its end (a printed command's --capevolve-run PROJECT)
        lines.append(re.sub(rf"(^|[ /]){project}(/|\s|$)", r"\1PROJECT\2", line))
    return lines


def junit_testcases(junit: Path, project: str) -> list[tuple]:
    """Every testcase of a junit file, without its times or the project folder's name, in file order."""
    cases = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        attrs = {k: v.removeprefix(f"{project}.") for k, v in case.attrib.items() if k != "time"}
        children = [(child.tag, dict(child.attrib), (child.text or "").strip()) for child in case]
        properties = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        cases.append((sorted(attrs.items()), properties, children))
    return cases
