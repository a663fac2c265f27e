"""The session's exit codes, fixed so a CI job can branch on the outcome (see README)."""

from __future__ import annotations

OK = 0
REJECTED = 10
INDECISIVE = 11
INFRA_FAILURE = 12

# pytest's own outcomes that a capevolve session replaces with its own: a task the agent
# failed is not a failed session, and a fully resumed run that owed nothing is complete.
# pytest.ExitCode's OK, TESTS_FAILED and NO_TESTS_COLLECTED (an IntEnum: equal to these), named
# by value so ``capevolve gate`` can read the codes without importing pytest
REPLACEABLE = (0, 1, 5)
