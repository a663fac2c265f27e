"""Screens: what refuses a candidate before any rollout is paid for it.

Controller only, while planning: the tamper and leak guards always (indecisive), a gate's microcases too (a
failure: reject). A refusal is a verdict without numbers, written with the session's other verdicts."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

from .._decide.verdict import INDECISIVE, REJECT, Verdict
from .._engine.checks import ProjectEnv
from .._engine.checks import run as run_microcase
from .._policy import guards
from .._project import leak
from .._project.candidate import SEED_TAG, CandidateError, compare_digests, content_hash, text_hash_of
from .._project.harness import TASKS_KEY, expand, is_protected, protected_digests
from .._project.microcase import Microcase, refuse_test_tasks
from .._project.microcase import load_project as load_microcases
from .._project.spec import Spec
from .._store.log.event_kinds import MICROCASES
from .._store.rundir import RunDir
from ..exitcodes import first_few


class Screens:
    def __init__(self, spec: Spec, rundir: RunDir, *, microcases: bool) -> None:
        self.spec = spec
        self.rundir = rundir
        self.refusals: list[Verdict] = []
        self._use_microcases = microcases
        self._microcases: list[Microcase] = []
        self._env = ProjectEnv(spec)  # the project's adapter, loaded on first need
        self._protected = expand(spec.protected_paths, spec.adapter)
        self._seed_protected: dict[str, str] | None = None
        self._guarded: dict[str, str] = {}
        self._matcher: leak.Matcher | None = None
        self._inherited: dict[str, set[str]] = {}
        self._parent_hashes: dict[str, str] = {}
        self._tasks_digest: str | None = None  # the pool the harness lock checked: the needles' source
        # tag → the content hash of the bytes its leak screen read: registration refuses any others
        self.screened: dict[str, str] = {}
        self.screened_text: dict[str, str] = {}  # their text hash, which the near-repeat check reads

    def close(self) -> None:
        self._env.close()

    def prepare(
        self,
        test_ids: Sequence[str],
        val_ids: Sequence[str] = (),
        harness_now: Mapping[str, str] | None = None,
    ) -> None:
        """Load the microcases (refusing any on a sealed task) and note the val and test ids and gold
        answers no candidate may hold (and the pool's digest in ``harness_now``, which keys a clean leak
        screen in the sealed summary)."""
        self._guarded = {**dict.fromkeys(val_ids, "val"), **dict.fromkeys(test_ids, "test")}
        self._tasks_digest = (harness_now or {}).get(TASKS_KEY)
        if self._use_microcases:
            self._microcases = load_microcases(self.spec.project_dir)
            refuse_test_tasks(self._microcases, test_ids)

    def refused(self, tag: str, path: Path, best: str) -> bool:
        """The screens, on one read of the candidate's files: its hash, noted in ``screened``, is what the
        registration holds the snapshot to (and the repeat check reads), so a writer racing the screens (an
        optimizer's process writing its work copy while the broker gates it) cannot have one version judged
        and another run. The microcases run a copy of that read, under the folder's name."""
        try:
            digest, files = leak.read_candidate(path)
        except CandidateError as exc:  # a link leaving the folder, a FIFO, a loop: the tamper guard's
            return self._tampered(tag, path, best, [f"refused: {exc}"])
        self.screened[tag], self.screened_text[tag] = digest, text_hash_of(files)
        return (
            self._tampered(tag, path, best, self._changes(files))
            or self._leaks(tag, path, best, digest, files)
            or self._fails_microcases(tag, path, best, files)
        )

    def _changes(self, files: dict[str, bytes]) -> list[str]:
        if self._seed_protected is None:
            # hashed once per session: the seed is the reference for every candidate
            snapshot = self.rundir.snapshots.snapshot_dir(SEED_TAG)
            seed = snapshot if snapshot.is_dir() else self.spec.capability_path
            self._seed_protected = protected_digests(seed, self._protected)
        # harness.tampered's comparison, on the bytes read: what the other screens judge, registration holds
        theirs = {
            rel: sha256(data).hexdigest() for rel, data in files.items() if is_protected(rel, self._protected)
        }
        return compare_digests(theirs, self._seed_protected)

    def _leaks(self, tag: str, path: Path, best: str, digest: str, files: dict[str, bytes]) -> bool:
        """A candidate whose added lines (against ``best``) hold a guarded id or gold answer: indecisive.
        Its files are read once: the bytes screened are the bytes hashed, noted in ``screened`` for the
        registration to hold the snapshot to."""
        min_length = self.spec.leak_guard_min_length
        if min_length is None or not self._guarded:
            return False
        snapshot = self.rundir.snapshots.snapshot_dir(best)
        parent = snapshot if snapshot.is_dir() else self.spec.capability_path
        key = self._screen_key(digest, best, parent, min_length)
        summary = self.rundir.rollouts.summary
        if key is not None and summary.screened_clean(key):
            return False  # these bytes, screened clean against these needles, by the sealed summary
        if self._matcher is None:
            # the whole pool (the adapter's, loaded once): it tells a label from an answer
            self._matcher = leak.Matcher(leak.needles(self._env.pool(), self._guarded, min_length))
        if best not in self._inherited:
            self._inherited[best] = leak.parent_lines(parent)
        found = leak.find_leaks(files, self._inherited[best], self._matcher)
        if not found and key is not None:
            summary.note_clean(key)
        if found:
            shown = first_few([f.describe() for f in found])
            self.refuse(
                tag,
                best,
                INDECISIVE,
                guards.LEAK,
                f"never scored: an edit encodes a general rule, never a task's id or answer ({shown})"
                + leak.word_id_note(found),
                {
                    "leaks": [{"file": f.path, "line": f.line, "kind": f.needle.kind} for f in found],
                    "leak_guard_min_length": min_length,
                    "source": str(path),
                },
            )
        return bool(found)

    def _screen_key(self, digest: str, best: str, parent: Path, min_length: int) -> str | None:
        if self._tasks_digest is None:
            return None
        if best not in self._parent_hashes:
            self._parent_hashes[best] = content_hash(parent)
        return leak.screen_key(
            digest, self._parent_hashes[best], self._tasks_digest, self._guarded, min_length
        )

    def _tampered(self, tag: str, path: Path, best: str, changes: list[str]) -> bool:
        if changes:
            shown = first_few(changes, 5)
            self.refuse(
                tag,
                best,
                INDECISIVE,
                guards.TAMPER,
                f"never scored: it changes what scores it ({shown})",
                {"changed_paths": changes, "protected_paths": list(self._protected), "source": str(path)},
            )
        return bool(changes)

    def _fails_microcases(self, tag: str, path: Path, best: str, files: Mapping[str, bytes]) -> bool:
        """The microcases, run on a copy of the one read (the folder's name kept: an adapter may key on it),
        so a writer swapping the folder around them cannot have other bytes judged than registered."""
        if not self._microcases:
            return False
        with tempfile.TemporaryDirectory(prefix="capevolve-screened-") as scratch:
            copy = Path(scratch) / path.name
            copy.mkdir()
            for relative, data in files.items():
                (copy / relative).parent.mkdir(parents=True, exist_ok=True)
                (copy / relative).write_bytes(data)
            ran_each = [(case, run_microcase(case, copy, self._env)) for case in self._microcases]
        failed = [
            {"id": case.id, "cluster": case.cluster, "expected": outcome.expected, "got": outcome.got}
            | ({"confinement": outcome.unconfined} if outcome.unconfined else {})
            for case, outcome in ran_each
            if not outcome.ok
        ]
        ran = len(self._microcases)
        self.rundir.log.append_event(MICROCASES, tag=tag, ran=ran, failed=[f["id"] for f in failed])
        if failed:
            first = failed[0]
            self.refuse(
                tag,
                best,
                REJECT,
                guards.MICRO_TEST_FAIL,
                f"failed {len(failed)} of {ran} microcases before any rollout: {first['id']} (cluster "
                f"{first['cluster']}) expected {first['expected']}, got {first['got']}"
                + (f" (the call ran {first['confinement']})" if "confinement" in first else ""),
                {"failed_microcases": failed, "microcases_run": ran, "source": str(path)},
            )
        return bool(failed)

    def refuse(
        self, tag: str, best: str, decision: str, guard: guards.Guard, reason: str, details: dict[str, Any]
    ) -> None:
        """Record a refusal (a screen's, or a repeat found in planning), written with the other verdicts."""
        verdict = guards.refusal_verdict(
            self.spec,
            guard,
            guards.Checkpoint.SCREEN,
            tag=tag,
            against=best,
            decision=decision,
            reason=reason,
            details=details,
        )
        self.refusals.append(verdict)
