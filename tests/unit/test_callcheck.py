"""A ``call`` microcase's process (:mod:`pytest_capevolve._engine.callcheck`) says which boundary the
candidate's function ran in, in the words a sandbox child's rollouts use: a refused boundary is labelled."""

from __future__ import annotations

import errno
import io
import json
import sys

import pytest

from pytest_capevolve._confine import launch
from pytest_capevolve._confine.landlock import Boundary
from pytest_capevolve._engine import callcheck


def _refuse(boundary: Boundary) -> None:
    raise OSError(errno.EINVAL, "Invalid argument", "landlock_add_rule")


def test_a_call_whose_boundary_the_kernel_refused_says_it_ran_unconfined(tmp_path, monkeypatch) -> None:
    (tmp_path / "tool.py").write_text("def twice(x):\n    return 2 * x\n")
    boundary = Boundary(writable=(tmp_path,), readable=(tmp_path,)).as_json()
    request = {"file": "tool.py", "function": "twice", "args": [21], "kwargs": {}, "boundary": boundary}
    monkeypatch.setattr(launch, "confine", _refuse)  # the kernel refuses a rule: nothing was applied
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the call puts the candidate's folder first
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(request)))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    callcheck.main()
    first, result = map(json.loads, out.getvalue().splitlines())  # the label, written before the call
    assert result == {"value": 42}
    # the label a sandbox child refused the same way gives its rollouts (launch.confined's)
    refused = launch.confined(boundary)
    assert not refused.confined
    assert first == {"confinement": refused.label}
    assert first["confinement"].startswith("unconfined (the kernel refused the boundary: ")


@pytest.mark.parametrize("label", ["", "confined (Landlock ABI 6)"])
def test_an_outcome_is_unconfined_only_when_candidate_code_ran_outside(label) -> None:
    from pytest_capevolve._engine.checks import Outcome

    assert Outcome(True, "", "", label).unconfined is None
    loose = "unconfined (the kernel refused the boundary: [Errno 22] Invalid argument)"
    assert Outcome(True, "", "", loose).unconfined == loose
