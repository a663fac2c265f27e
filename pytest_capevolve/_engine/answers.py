"""A sandbox child's answers as the scoring process reads them: each checked field by field
(:func:`decode_answer`) and replayed here (:class:`Answer`); and what a rollout its child never
answered comes to — lost (no child could start: missing data), caused (a death, a kill, a timeout,
garbage: the candidate's failure, :func:`.runner.charge`) or never run (queued behind one that
ended: run afresh) — with the words that say why."""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from .._project.adapter import Rollout
from .runner import Scored, timeout_message
from .wire import ValueLoader, WireError

GRACE_S = 2.0  # past its deadline, how long a child may take to answer before it is killed


@dataclass
class Answer:
    """One child's answer to one request, as values."""

    scored: Scored
    stdout: str = ""
    stderr: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)

    def replay(self) -> Scored:
        """Write and log here what the rollout wrote and logged in the child; its scored rollout,
        the candidate's failure when what it sent cannot be replayed (a record whose name or line
        is no text or number raised here, and the item left no record: a failing draw unrecorded
        is paid again, a re-roll the candidate chose)."""
        try:
            if self.stdout:
                sys.stdout.write(self.stdout)
            if self.stderr:
                sys.stderr.write(self.stderr)
            for fields in self.records:
                record = logging.makeLogRecord(fields)
                logging.getLogger(record.name).handle(record)
        except Exception as exc:
            said = f"the sandbox process sent output or a log record this process cannot replay ({exc!r})"
            self.scored = replace(self.scored, rollout=None, reward=None, infra_error=None, caused=said)
        return self.scored


# what a request queued behind a rollout whose child died is settled with: it never ran
NEVER_RAN = Answer(Scored(rollout=None))


def lost_answer(message: str, seconds: float = 0.0) -> Answer:
    """A rollout the harness failed to run (no child could start): missing data."""
    return Answer(Scored(rollout=None, infra_error=message, seconds=round(seconds, 6)))


def caused_answer(message: str, seconds: float = 0.0) -> Answer:
    """A rollout its child ended, as this side saw it (a death, a kill, a timeout, garbage on
    the pipe): the candidate's failure (:func:`.runner.charge`)."""
    return Answer(Scored(rollout=None, caused=message, seconds=round(seconds, 6)))


def exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def died(code: int | None) -> str:
    return (
        f"the sandbox process running the candidate's code ended during the rollout "
        f"({exit_text(code)}); a new one runs the next rollout"
    )


def killed_late(timeout_s: float | None) -> str:
    late = f"and its sandbox process did not answer {GRACE_S:g}s later: it was killed"
    return f"{timeout_message(timeout_s)} {late}"


def garbled(exc: Exception) -> str:
    return f"the sandbox process sent a malformed answer ({exc}): it was killed"


MISANSWERED = "the sandbox process answered another request than the one asked: it was killed"


def decode_answer(payload: bytes, values: ValueLoader, seconds: float) -> tuple[int, Answer]:
    """An answer frame (:data:`.wire.ANSWER_FIELDS`, then the rollout's pickle if announced) as
    values, checked field by field; WireError for anything else. ``seconds``: how long this
    side waited for it — the rollout's time, as this side saw it."""
    loaded = values.load_all(payload, 2)
    head = loaded[0]
    if not (type(head) is tuple and len(head) == 6 and type(head[0]) is int):
        raise WireError("an answer without a request id")
    request_id, infra_error, stdout, stderr, records, has_rollout = head
    if not (infra_error is None or isinstance(infra_error, str)):
        raise WireError("infra_error is not text")
    if not (isinstance(stdout, str) and isinstance(stderr, str)):
        raise WireError("captured output is not text")
    if not (isinstance(records, list) and all(isinstance(r, dict) for r in records)):
        raise WireError("log records are not fields")
    if len(loaded) != (2 if has_rollout is True else 1):
        raise WireError("the answer's rollout is not the one it announced")
    rollout = loaded[1] if has_rollout is True else None
    if rollout is not None and not isinstance(rollout, Rollout):
        raise WireError(f"the rollout is a {type(rollout).__name__}, not a Rollout")
    if rollout is None and infra_error is None:
        infra_error = "the sandbox process answered with neither a rollout nor an error"
    scored = Scored(rollout=rollout, infra_error=infra_error, seconds=round(seconds, 6))
    return request_id, Answer(scored, stdout, stderr, records)
