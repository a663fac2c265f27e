"""One error root carries its exit code: the ``capevolve`` command and the session boundary
each catch :class:`CapevolveError` once, and the code comes from the class, not the catcher."""

from __future__ import annotations

import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._cli.common import report_error
from pytest_capevolve._policy.booking.commit import CommitRefused
from pytest_capevolve._project.adapter import AdapterError
from pytest_capevolve._project.candidate import CandidateError
from pytest_capevolve._project.microcase import MicrocaseError
from pytest_capevolve._project.spec import SpecError
from pytest_capevolve._project.splits import TestSealError
from pytest_capevolve._store.readers.harness_lock import HarnessChanged
from pytest_capevolve._store.rollouts.record import RecordError
from pytest_capevolve._store.rundir import RunDirError
from pytest_capevolve.exitcodes import CapevolveError, Refusal, UsageError

CARRIED = [
    (UsageError, exitcodes.USAGE),
    (RunDirError, exitcodes.USAGE),
    (HarnessChanged, exitcodes.USAGE),
    (SpecError, exitcodes.USAGE),
    (AdapterError, exitcodes.USAGE),
    (MicrocaseError, exitcodes.USAGE),
    (RecordError, exitcodes.USAGE),
    (TestSealError, exitcodes.USAGE),
    (Refusal, exitcodes.REFUSED),
    (CommitRefused, exitcodes.REFUSED),
    (CandidateError, exitcodes.REFUSED),
]


@pytest.mark.parametrize(("kind", "code"), CARRIED, ids=[k.__name__ for k, _ in CARRIED])
def test_each_error_is_under_the_root_and_carries_its_code(
    kind: type[CapevolveError], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert issubclass(kind, CapevolveError)
    assert report_error("status", kind("the reason; the way on")) == code
    line = capsys.readouterr().err
    said = "error: capevolve status refused: " if code == exitcodes.REFUSED else "error: "
    assert line == f"{said}the reason; the way on\n"


def test_a_record_error_is_still_a_value_error() -> None:
    """Readers that catch a bad record as ``ValueError`` keep working under the root."""
    assert issubclass(RecordError, ValueError)
