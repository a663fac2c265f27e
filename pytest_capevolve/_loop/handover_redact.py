"""The handover never names a test task: every test id in a handover file is blanked.

Test ids can reach handover text (the leak guard's refusal names the test task a candidate
held, and its diff holds the id), and repeating them would confirm which guessed ids are test
tasks. So each test id, as a whole token in any case, becomes ``[a test task]``; ids under three
characters are left alone ("7" is every seventh line, not a task). Test scores never reach the
handover: it is built from val verdicts."""

from __future__ import annotations

import re
from collections.abc import Callable

from .._store.rundir import RunDir

REDACTED_TEST_ID = "[a test task]"
MIN_ID_LENGTH = 3


def test_id_redactor(rundir: RunDir) -> Callable[[str], str]:
    """A function that blanks the run's test ids in a text (the identity before splits exist)."""
    splits = rundir.splits() or {}
    ids = sorted(
        {str(t) for t in splits.get("test", []) if len(str(t)) >= MIN_ID_LENGTH}, key=len, reverse=True
    )
    if not ids:
        return lambda text: text
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, ids)) + r")(?!\w)", re.IGNORECASE)
    return lambda text: pattern.sub(REDACTED_TEST_ID, text)
