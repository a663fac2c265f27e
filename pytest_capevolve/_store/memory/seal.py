"""The sealed test split: scored exactly once per run, by one finalize session.

``.finalize.lock`` is a ``flock`` held for a finalize's life (dropped if it dies, so a crash never
leaves the run stuck); the ``test_opened`` event, before the first test rollout, closes the run to
gates; ``seal.json`` (or a ``test_scored`` event) is the burned seal. Test rollouts are persisted as
they arrive, so a crashed finalize pays only what is missing and cannot redraw."""

from __future__ import annotations

import fcntl
import os
from typing import IO, Any

from ..._project.splits import TEST_SPLIT, TestSealError
from ..._project.way_on import pasteable
from ..files import atomic_write_json, read_json
from ..log.event_kinds import TEST_OPENED, TEST_SCORED
from ..rollouts.record import RolloutRecord
from ..rundir import RunDir

__all__ = ["Seal", "TestSealError", "TEST_SPLIT"]


class Seal:
    """One run's seal. Controller side only (the finalize session, ``capevolve measure``)."""

    def __init__(self, rundir: RunDir) -> None:
        self.rundir = rundir
        self.path = rundir.root / "seal.json"
        self._lock_path = rundir.root / ".finalize.lock"
        self._claim: IO[str] | None = None

    def burned(self) -> dict[str, Any] | None:
        """The recorded test score, or None while sealed (the event burns it even without the file)."""
        if self.path.is_file():
            return dict(read_json(self.path))
        scored = self.rundir.log.of_kinds(TEST_SCORED)
        if not scored:
            return None
        last = scored[-1]
        best = {"tag": last.get("best"), "mean": last.get("mean")}
        return {"best": best, "seal_file_missing": True, "event_seq": last.get("seq")}

    def opened(self) -> dict[str, Any] | None:
        """The ``test_opened`` event once a finalize began paying test rollouts."""
        events = self.rundir.log.of_kinds(TEST_OPENED)
        return dict(events[0]) if events else None

    def closed(self) -> dict[str, Any] | None:
        return self.burned() or self.opened()

    def open(self, test_ids: list[str]) -> None:
        """Record, before the first test rollout is paid, that the test split is being scored."""
        if not self.held:
            raise TestSealError("opening the test split needs the finalize claim")
        if self.opened() is None:
            with self.rundir.lock():
                self.rundir.log.append_event(TEST_OPENED, test_ids=sorted(test_ids))

    def claim(self) -> None:
        """Become the one finalize session of this run (claimed before the burned check, so exactly
        one concurrent session gets past), or raise TestSealError."""
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
        return pasteable(
            f"run {self.rundir.run_id}: the test split was already scored (best {best.get('tag')!r}, "
            f"in {self.path}); it is scored exactly once per run. Read it with `capevolve measure PROJECT`; "
            "for a new search, start a new run (`pytest --capevolve-run PROJECT --capevolve-new-run` or "
            "`capevolve hill-climb PROJECT --new-run`) and finalize that run, with a split_ids_file leaving "
            "these test tasks out (in the spec before it starts: harness) or --capevolve-test-reused",
            self.rundir.project_dir,
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
        """Write the test score, only while claimed; ``test_ids`` go in the event and the project's record."""
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
        """Persisted test rollouts: for the claim holder, or anyone once burned."""
        if not self.held and self.burned() is None:
            finalize = pasteable("pytest --capevolve-finalize PROJECT", self.rundir.project_dir)
            raise TestSealError(
                f"run {self.rundir.run_id}: the test split is sealed until finalize "
                f"({finalize}); its rollouts cannot be read before"
            )
        return self.rundir.rollouts._read_rollouts(TEST_SPLIT)
