"""The session's exit codes, fixed so a CI job can branch on the outcome (see README)."""

from __future__ import annotations

import pytest

OK = 0
REJECTED = 10
INDECISIVE = 11
INFRA_FAILURE = 12

# pytest's own outcomes that a capevolve session replaces with its own: a task the agent
# failed is not a failed session, and a fully resumed run that owed nothing is complete.
REPLACEABLE = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED)
