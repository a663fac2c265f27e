"""``capevolve hill-climb``: the optimize loop that runs by itself, every candidate a commit.

One iteration (cap-evolve's ``run_step``), in the user's process: a work copy of the best; a
prompt of the parent's val failures (``--signal train``: train's, so edits are not fitted to the
split that judges them), with handover files in the work copy, never in a snapshot; the optimizer
under a timeout (a crash or timeout leaves the parent's bytes, booked a ``repeat`` reject unpaid);
a real gate session as a child ``python -m pytest --capevolve-run …``, so every guard, xdist,
persistence and resume are the plugin's; the verdict booked and the candidate stored.
``--resume`` finishes an iteration a kill cut off; a decided one is never decided again. One loop
per project: a second would delete the first's work copies and pay an optimizer twice, so a loop
holds ``.capevolve/loop.lock`` (an ``flock``, released when its process dies) and a second is
refused in one line naming the first. Never imports pytest."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from .._confine.landlock import expected
from .._confine.launch import environment
from .._decide.basis import Basis
from .._policy import guards
from .._policy.alpha.gate_settings import constant_run_note, run_loop_schedule
from .._policy.booking.journal_entry import JOURNAL
from .._project.candidate import SEED_TAG, handover_ignore, unified_diff
from .._project.harness import expand
from .._project.spec import load_spec, resolve_spec_path
from .._project.way_on import pasteable
from .._show.views import refresh as redraw_views
from .._store.files import atomic_write_json, atomic_write_text, read_json
from .._store.log.event_kinds import HILL_CLIMB_ITERATION, HILL_CLIMB_STOPPED
from .._store.readers.evidence import index_records
from .._store.rundir import RUNS_DIR, RunDir, RunDirError
from .._store.snapshots import writable_copy
from ..exitcodes import Refusal
from .diagnose import diagnose
from .git_store import CandidateStore, StoreError, open_store
from .handover import clear_handover, failure_examples, new_work_copy, test_id_redactor, write_handover
from .handover_docs import HILL_CLIMB
from .hill_climb_options import (
    Options,
    check_limits,
    check_signal,
    checked_focus,
    checked_optimizer,
    ini_overrides,
    instructions_template,
    names_a_schedule,
    stop_reason,
)
from .hill_climb_record import (
    PROPOSAL_SPEND,
    LoopIncomplete,
    book_iteration,
    finish,
    refuse_extra_tamper,
    refuse_over_budget,
    refuse_repeat_unpaid,
    store_seed,
    summary_rows,
)
from .journal import proposals
from .launch import gate_flags, missing_on, run_logged, session_command
from .optimizer import STARTED_BY, checked_writable, optimizer_argv, optimizer_boundary, run_optimizer
from .prompt import PromptInputs, convergence, focus_tasks, render_prompt

PREFIX = "cand_"
LOCK_NAME = "loop.lock"


def cid_of(n: int) -> str:
    return f"{PREFIX}{n:04d}"


def _number(cid: str) -> int:
    return int(cid[len(PREFIX) :])


class HillClimb:
    """One ``capevolve hill-climb`` invocation: check the flags, then iterate until a stop."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.spec_path = resolve_spec_path(options.project)
        self.ini = ini_overrides(options, self.spec_path)
        self.spec = load_spec(self.spec_path, self.ini)  # a SpecError: the CLI's refusal (exit 2)
        self.optimizer = checked_optimizer(options, self.spec)
        self.focus = checked_focus(options, self.spec)
        self.store_kind = options.store or self.spec.store or "git"
        check_limits(options)
        self.template = instructions_template(options)
        checked_writable(self.spec, options.writable)  # refused before the loop starts, not mid-round
        self.extra_protected = (
            expand(options.protected_paths, self.spec.adapter) if options.protected_paths else ()
        )
        self.rundir: RunDir | None = None
        self.store: CandidateStore | None = None

    def _session_args(self, rundir: RunDir | None) -> list[str]:
        run_id = rundir.run_id if rundir is not None else None
        ini = self.ini
        if rundir is not None and "gate_alpha_schedule" in ini:  # a run that froze one keeps it
            ini = {**ini, "gate_alpha_schedule": run_loop_schedule(rundir)}
        return session_command(self.spec_path, run_id=run_id, workers=self.o.workers, ini=ini)

    def _baseline(self, rundir: RunDir | None = None) -> RunDir:
        """The run, with the best's val rollouts complete; runs a plain evaluation when not: the seed's
        baseline, or an adopted best's, booked unpaid (:mod:`.._policy.booking.adoption`)."""
        new_run = self.o.new_run and rundir is None
        if rundir is None and not new_run:
            try:
                rundir = RunDir.resolve(self.spec.project_dir, self.o.run_id, create=False)
            except RunDirError:
                if self.o.run_id is not None:
                    raise Refusal(f"no run {self.o.run_id!r} in {self.spec.project_dir}") from None
        if rundir is not None and self._has_baseline(rundir):
            return rundir
        best = rundir.state.best() if rundir is not None else SEED_TAG
        self.o.log(
            "--new-run: a new run, its baseline first"
            if new_run
            else "no baseline yet (the best's val rollouts): running a plain evaluation session"
            if best == SEED_TAG  # an adopted best is booked unpaid: say so, not "no baseline yet"
            else f"the best {best!r} has no val rollouts in this run (booked unpaid, as an adoption is): "
            "paying them once in a plain evaluation session"
        )
        log = (
            rundir.hill_climb_dir() if rundir is not None else self.spec.project_dir / ".capevolve"
        ) / "baseline.log"
        args = self._session_args(rundir) + (["--capevolve-new-run"] if new_run else [])
        code = run_logged(args, self.spec.project_dir, log)
        if rundir is None:
            try:
                rundir = RunDir.resolve(self.spec.project_dir, None, create=False)
            except RunDirError:
                raise LoopIncomplete(
                    f"the baseline session exited {code} and created no run; see {log}"
                ) from None
        if not self._has_baseline(rundir):
            raise LoopIncomplete(
                f"the baseline session exited {code} without the best's val rollouts; see {log}"
            )
        return rundir

    def _has_baseline(self, rundir: RunDir) -> bool:
        return (
            rundir.splits() is not None and missing_on(self.spec, rundir, "val", [rundir.state.best()]) == 0
        )

    def run(self) -> dict[str, Any]:
        """The loop, every session and booking labelled with the optimizer's confinement."""
        state = expected()
        self.o.log(f"the optimizer runs {state.label}")
        with mock.patch.dict(os.environ, environment(state, STARTED_BY)):  # as it was, once it returns
            return self._run()

    def _run(self) -> dict[str, Any]:
        rundir = self.rundir = self._baseline()
        note = constant_run_note(rundir, names_a_schedule(self.spec_path))
        if note is not None:
            self.o.log(pasteable(note, self.spec.project_dir))
        check_signal(self.o, list((rundir.splits() or {}).get("train", [])))
        guards.refuse_finalized(rundir, guards.Checkpoint.HILL_CLIMB)
        try:
            self.store = open_store(self.store_kind, rundir.root)
        except StoreError as exc:
            raise Refusal(str(exc)) from None
        store_seed(self.store, self.store_kind, rundir, self.spec.capability_path)
        started = self._iterations()
        pending = [c for c in started if not self._decided(c)]
        if pending and not self.o.resume:
            raise Refusal(
                f"iteration {pending[-1]} of run {rundir.run_id} was cut off before its decision; "
                "continue it with --resume (it pays only the rollouts still missing)"
            )
        for cid in started:  # a kill between booking and the store leaves a decision unrecorded
            if self._decided(cid):
                self._finish(cid)
        for cid in pending:
            self.o.log(f"resuming {cid}")
            self._iterate(cid)
        proposed = len(proposals(rundir))  # failures in a row count from this invocation's
        while (stop := stop_reason(self.spec, rundir, self.o, len(self._iterations()), proposed)) is None:
            self._iterate(self._next_cid())
        return self._summary(stop)

    def _next_cid(self) -> str:
        """The next tag past every tag the run holds (an agent's `capevolve work new cand_0001`)."""
        n, held = max(map(_number, self._iterations()), default=0) + 1, self._rundir.snapshots.known_tags()
        while cid_of(n) in held or self._decided(cid_of(n)) or self._rundir.work_dir(cid_of(n)).exists():
            n += 1
        return cid_of(n)

    def _iterations(self) -> list[str]:
        base = self._rundir.hill_climb_dir()
        found = [p.name for p in base.glob(f"{PREFIX}*") if (p / "iteration.json").is_file()]
        return sorted(found, key=_number)

    @property
    def _rundir(self) -> RunDir:
        assert self.rundir is not None
        return self.rundir

    def _decided(self, cid: str) -> dict[str, Any] | None:
        return next((d for d in self._rundir.decisions() if d["tag"] == cid), None)

    def _iterate(self, cid: str) -> None:
        rundir = self._rundir
        folder = rundir.hill_climb_dir(cid)
        meta_path = folder / "iteration.json"
        if self._decided(cid):
            self._finish(cid)
            return
        if meta_path.is_file():
            meta = dict(read_json(meta_path))
        else:
            state = rundir.state.read_state()
            meta = {
                "iteration": _number(cid),
                "cid": cid,
                "parent": rundir.state.best(),
                "focus_mode": self.focus,
                "stall": int(state.get("stall", 0)),
                "started": time.time(),
            }
            atomic_write_json(meta_path, meta)
            rundir.log.append_event(HILL_CLIMB_ITERATION, tag=cid, parent=meta["parent"], phase="started")
        workdir = rundir.work_dir(cid)
        if not (folder / "optimizer.json").is_file():
            if workdir.exists():  # the optimizer was cut off: start its edit again from the parent
                if cid in rundir.snapshots.known_tags():
                    raise LoopIncomplete(
                        f"{cid} was registered before its optimizer finished; inspect {folder}"
                    )
                shutil.rmtree(workdir)
            new_work_copy(self.spec, rundir, cid, meta["parent"])
            self._propose(cid, meta, folder, workdir)
        self._evaluate(cid, meta, folder, workdir)
        self._finish(cid)
        self._baseline(rundir)  # an adopted best, booked unpaid: its val rollouts, once

    def _propose(self, cid: str, meta: dict[str, Any], folder: Path, workdir: Path) -> None:
        """Write the prompt and the handover files, run the optimizer, clean the work copy."""
        rundir = self._rundir
        parent = meta["parent"]
        signal = self.o.signal
        if signal == "train":
            self._train_signal(parent, folder)
        report = diagnose(self.spec, rundir, parent, split=signal)
        rows = report["tasks"]
        focus = focus_tasks(rows, self.focus, meta["iteration"])
        meta.update(focus=focus, convergence=convergence(meta["stall"]))
        atomic_write_json(folder / "iteration.json", meta)
        prompt = folder / "prompt.md"
        inputs = PromptInputs(
            iteration=meta["iteration"],
            cid=cid,
            parent=parent,
            workdir=str(workdir),
            rows=rows,
            examples=failure_examples(self.spec, rundir, parent, signal),
            focus_mode=self.focus,
            focus=focus,
            stall=meta["stall"],
            capabilities=self.o.capabilities,
            split=signal,
        )
        atomic_write_text(prompt, test_id_redactor(rundir)(render_prompt(inputs, self.template)))
        write_handover(self.spec, rundir, cid, parent, workdir, loop=HILL_CLIMB, prompt=prompt)

        argv = optimizer_argv(self.optimizer or "", workdir, prompt)
        # inside the boundary: its work copy and a scratch folder writable, the prompt readable
        boundary = optimizer_boundary(self.spec, [workdir], [prompt], also_writable=self.o.writable)
        timeout = self.o.optimizer_timeout
        result = run_optimizer(
            argv, cwd=self.spec.project_dir, timeout=timeout, folder=folder, boundary=boundary
        )
        journal = workdir / JOURNAL  # kept first: a crashed optimizer's notes reach the next round too
        (folder / JOURNAL).unlink(missing_ok=True)  # never a file an earlier round planted here
        if journal.is_file() and not journal.is_symlink():
            shutil.copyfile(journal, folder / JOURNAL)
        if not result["ok"]:
            self.o.log(
                f"{cid}: optimizer {result['outcome']}: the candidate is an unchanged copy of {parent}"
            )
        renewed(workdir if result["ok"] else self._source(parent), workdir, folder / "work")
        clear_handover(workdir)
        diff = unified_diff(self._source(parent), workdir, parent, cid)
        atomic_write_text(folder / "diff.patch", diff)
        atomic_write_json(folder / "optimizer.json", result)  # the marker: the proposal is complete
        # the reported cost is booked from the log, not from optimizer.json (rewritable meanwhile)
        self._rundir.log.append_event(
            HILL_CLIMB_ITERATION,
            tag=cid,
            phase="proposed",
            optimizer=result["outcome"],
            diff_sha256=hashlib.sha256(diff.encode("utf-8")).hexdigest(),  # what later rounds are shown
            **{key: result[key] for key in PROPOSAL_SPEND if key in result},
        )

    def _train_signal(self, parent: str, folder: Path) -> None:
        """``--signal train``: the parent's train rollouts, paid once per new best (what is missing)."""
        rundir = self._rundir
        if missing_on(self.spec, rundir, "train", [parent]) == 0:
            return
        self.o.log(f"--signal train: evaluating {parent} on train (once per new best)")
        log = folder / "train.log"
        args = self._session_args(rundir) + ["--capevolve-split", "train"]
        code = run_logged(args, self.spec.project_dir, log)
        records = index_records(rundir.rollouts.indexed_rollouts("train", [parent]))
        if not records.get(parent):
            raise LoopIncomplete(f"the train session for {parent} exited {code} without rollouts; see {log}")

    def _source(self, tag: str) -> Path:
        return self.spec.capability_path if tag == SEED_TAG else self._rundir.snapshots.snapshot_dir(tag)

    def _evaluate(self, cid: str, meta: dict[str, Any], folder: Path, workdir: Path) -> None:
        """The guards and the val gate: a gate session on the work copy, then the booking."""
        rundir = self._rundir
        if rundir.verdicts.verdict(cid) is None and not self._refused_unpaid(cid, meta["parent"], workdir):
            args = self._session_args(rundir)
            args += gate_flags(workdir, cid, no_regression=self.o.no_regression)
            self.o.log(f"{cid}: gate session (parent {meta['parent']})")
            code = run_logged(args, self.spec.project_dir, folder / "gate.log")
            verdict = rundir.verdicts.verdict(cid)
            if verdict is None:
                raise LoopIncomplete(
                    f"the gate session of {cid} exited {code} without a verdict (see {folder / 'gate.log'}); "
                    "what it paid is kept: continue with capevolve hill-climb --resume"
                )
            if verdict.get("basis") == Basis.REPEAT:  # the session refused it before any rollout
                said = verdict["details"].get("repeats")
                self.o.log(f"{cid}: no gate, no rollout: byte-identical to {said!r} of another run")
        book_iteration(self.spec, rundir, cid, meta, folder)

    def _refused_unpaid(self, cid: str, parent: str, workdir: Path) -> bool:
        """Whether a verdict was written without a rollout: a change to a ``--protected-paths``
        path, a repeat of bytes the run holds, or a proposer that used up ``max_usd``."""
        rundir = self._rundir
        extra = self.extra_protected
        if extra and refuse_extra_tamper(self.spec, rundir, cid, parent, workdir, extra):
            return True
        if refuse_repeat_unpaid(self.spec, rundir, cid, parent, workdir):
            self.o.log(f"{cid}: repeats an earlier candidate's bytes; booked without a rollout")
            return True
        over = refuse_over_budget(self.spec, rundir, cid, parent)
        if over:
            self.o.log(f"{cid}: {over}")
        return bool(over)

    def _finish(self, cid: str) -> None:
        """The outcome file and the candidate store, once per decided iteration."""
        entry = self._decided(cid)
        assert entry is not None and self.store is not None
        finish(self.store, self.store_kind, self._rundir, cid, entry, self.o.log)

    def _summary(self, stop: str) -> dict[str, Any]:
        rundir = self._rundir
        state = rundir.state.read_state()
        rows = summary_rows(rundir, self._iterations())
        summary = {
            "run_id": rundir.run_id,
            "best": state["best_id"],
            "iterations": rows,
            "accepted": [r["tag"] for r in rows if r["decision"] == "accept"],
            "stall": state["stall"],
            "decisions": state["iterations"],
            "stopped": stop,
            "store": {"kind": self.store_kind, "path": str(self.store.root) if self.store else None},
        }
        atomic_write_json(rundir.hill_climb_dir() / "summary.json", summary)
        problem = redraw_views(self.spec, rundir, {})  # the last booking came after the last session
        if problem:
            self.o.log(problem)
        rundir.log.append_event(HILL_CLIMB_STOPPED, reason=stop, best=state["best_id"])
        self.o.log(f"stopped: {stop}")
        return summary


def renewed(source: Path, workdir: Path, fresh: Path) -> None:
    """``workdir`` made a new folder of ``source``'s files: a process the optimizer left keeps its boundary
    on the old one, so it cannot rewrite the proposal once its diff is taken (a FIFO, never copied, is
    left for the candidate checks, which refuse it in one line)."""
    shutil.rmtree(fresh, ignore_errors=True)
    with contextlib.suppress(shutil.Error):
        writable_copy(source, fresh, ignore=handover_ignore(source), symlinks=True)
        shutil.rmtree(workdir, ignore_errors=True)
        fresh.rename(workdir)
    shutil.rmtree(fresh, ignore_errors=True)


@contextlib.contextmanager
def only_loop(project_dir: Path) -> Iterator[None]:
    path = project_dir / RUNS_DIR.parent / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "{}"
            with contextlib.suppress(ValueError):
                holder = ", ".join(f"{k} {v}" for k, v in json.loads(holder).items())
            raise Refusal(
                f"another loop is running on {project_dir} ({holder}): one loop per project at a "
                "time — wait for it, or stop it (its work is kept; --resume goes on from it)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")}))
        handle.flush()
        yield
    finally:
        handle.close()  # drops the lock
