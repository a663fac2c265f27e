"""The sealed test split: scored exactly once per run, by one finalize session.

The seal is two files in the run dir:

- ``.finalize.lock`` — an exclusive, non-blocking ``flock`` held for a finalize session's whole
  life. A second session finds it held and is refused; the kernel drops it when the holder dies,
  so a crash never leaves the run stuck.
- the log's ``test_opened`` event, appended before the first test rollout is paid: from then
  no gate, screen, grow or merge runs in the run (:meth:`Seal.closed`), finished or not;
- ``seal.json`` — the test score, written atomically at the very end. Its existence *is* the
  burned seal: before it, nothing anywhere prints a test number; after it, no session scores
  the test split again.

Test rollouts are persisted as they arrive (``rollouts/test/``) so a crashed finalize loses
nothing and the next one pays only for what is missing — and cannot redraw what it already
has. Reading them goes through :meth:`Seal.test_rollouts`, which refuses while the seal is
unburned unless this process holds the finalize claim. No option or environment variable
changes any of this.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO, Any

from .._project.splits import TEST_SPLIT, TestSealError
from .event_kinds import TEST_OPENED, TEST_SCORED
from .files import atomic_write_json, read_json
from .record import RolloutRecord
from .rundir import RunDir

__all__ = ["Seal", "TestSealError", "TEST_SPLIT", "TEST_OPENED"]


class Seal:
    """One run's seal. Controller side only (the finalize session, ``capevolve measure``)."""

    def __init__(self, rundir: RunDir) -> None:
        self.rundir = rundir
        self.path = rundir.root / "seal.json"
        self._lock_path = rundir.root / ".finalize.lock"
        self._claim: IO[str] | None = None

    def burned(self) -> dict[str, Any] | None:
        """The recorded test score, or None while the test split is still sealed.

        The log is the record: a ``test_scored`` event burns the seal whether or not
        ``seal.json`` is still there, so deleting the file reopens nothing (the score then
        comes from the event, marked ``seal_file_missing``)."""
        if self.path.is_file():
            return dict(read_json(self.path))
        scored = self.rundir.log.of_kinds(TEST_SCORED)
        if not scored:
            return None
        last = scored[-1]
        return {
            "best": {"tag": last.get("best"), "mean": last.get("mean")},
            "seal_file_missing": True,
            "event_seq": last.get("seq"),
        }

    def opened(self) -> dict[str, Any] | None:
        """The log's ``test_opened`` event once a finalize began paying test rollouts, else None.

        From the first test rollout the test split is spent for choosing: its rewards sit in
        ``rollouts/test/`` whether or not the score is ever written, so a finalize stopped short
        (on purpose: ``--deselect`` of one rollout left the seal unburned and gating open) has
        already shown the test mean. It can still be finished, never gated around."""
        events = self.rundir.log.of_kinds(TEST_OPENED)
        return dict(events[0]) if events else None

    def closed(self) -> dict[str, Any] | None:
        """What ends gating in this run: the burned score, or else the opened test split."""
        return self.burned() or self.opened()

    def open(self, test_ids: list[str]) -> None:
        """Record, before the first test rollout is paid, that this run's test split is being
        scored (once per run: a resumed finalize finds it recorded)."""
        if not self.held:
            raise TestSealError("opening the test split needs the finalize claim")
        if self.opened() is None:
            with self.rundir.lock():
                self.rundir.log.append_event(TEST_OPENED, test_ids=sorted(test_ids))

    def claim(self) -> None:
        """Become the one finalize session of this run, or raise TestSealError.

        The claim is taken before the burned check, so of any number of concurrent sessions
        exactly one gets past here, and a session that starts after the burn sees it."""
        handle = open(self._lock_path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise TestSealError(
                f"run {self.rundir.run_id}: another finalize session ({holder}) is scoring the "
                "test split right now; it is scored once per run"
            ) from None
        done = self.burned()
        if done is not None:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
            raise TestSealError(self._already_scored(done))
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        self._claim = handle

    def _already_scored(self, done: dict[str, Any]) -> str:
        best = done.get("best", {})
        return (
            f"run {self.rundir.run_id}: the test split was already scored (best {best.get('tag')!r}, "
            f"in {self.path}); it is scored exactly once per run. "
            "Read it with `capevolve measure`; to measure a new search, start a new run with a "
            "session (`pytest --capevolve-run . --capevolve-new-run` or `capevolve hill-climb "
            "--new-run`) and finalize that run"
        )

    @property
    def held(self) -> bool:
        return self._claim is not None

    def release(self) -> None:
        if self._claim is not None:
            fcntl.flock(self._claim, fcntl.LOCK_UN)
            self._claim.close()
            self._claim = None

    def burn(self, result: dict[str, Any], test_ids: list[str] | None = None) -> None:
        """Write the test score: the one irreversible step, atomic, and only while claimed.
        ``test_ids`` (the tasks scored) go in the log's event and in the project's record of
        scored test tasks (:mod:`.project_seal`), so another run cannot score them unsaid."""
        if not self.held:
            raise TestSealError("burning the seal needs the finalize claim")
        ids = sorted(test_ids or [])
        reused = bool(result.get("test_reused"))
        with self.rundir.lock():
            atomic_write_json(self.path, result)
            self.rundir.log.append_event(
                TEST_SCORED,
                best=result["best"]["tag"],
                mean=result["best"]["mean"],
                seal=self.path.name,
                test_ids=ids,
                test_reused=reused,
            )
        project = self.rundir.project_dir
        if project is not None and ids:
            from .project_seal import record_scored
            from .shared_ledger import of_run
            from .task_keys import recorded

            keys, ledger = recorded(self.rundir), of_run(self.rundir)
            record_scored(project, self.rundir.run_id, ids, reused=reused, keys=keys, ledger=ledger)

    def test_rollouts(self) -> list[RolloutRecord]:
        """Persisted test rollouts: for the claim holder, or for anyone once the seal burned.
        Refused when asked, not when iterated."""
        if not self.held and self.burned() is None:
            raise TestSealError(
                f"run {self.rundir.run_id}: the test split is sealed until finalize "
                "(pytest --capevolve-finalize PROJECT); its rollouts cannot be read before"
            )
        return self.rundir.rollouts._read_rollouts(TEST_SPLIT)
