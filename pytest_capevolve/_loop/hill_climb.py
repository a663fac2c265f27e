"""``capevolve hill-climb``: the optimize loop that runs by itself, every candidate a commit.

One iteration (cap-evolve's ``run_step``), run by the CLI in the user's process:

1. parent = the current best; :func:`.work.new_work_copy` makes ``work/cand_NNNN/``;
2. the prompt (``hill_climb/cand_NNNN/prompt.md``): the parent's val failures from
   :func:`.diagnose.diagnose`, the focus (:func:`.prompt.focus_tasks`), the plateau signal, the
   ids to protect; handover files (LEDGER.md, JOURNAL.md, RUNMAP.md, rejected.jsonl,
   prior_iterations/) are put in the work copy — never part of a snapshot;
3. the optimizer command runs with ``{workdir}`` and ``{prompt}`` substituted, under a timeout
   (its process group is killed); a crash, timeout or non-zero exit leaves an unchanged copy
   of the parent, which the gate rejects: a wasted iteration, not a dead run;
4. a real gate session evaluates it, as a subprocess —
   ``python -m pytest --capevolve-run SPEC --capevolve-candidate WORKDIR --capevolve-gate
   --capevolve-commit none`` — so the tamper guard, microcases, null controls (reused while
   the best is unchanged), xdist, persistence and resume are the plugin's;
5. the verdict is booked through :func:`.commit.book` (the code of ``capevolve commit``) and
   the candidate recorded in the candidate store (:mod:`.store`).

It stops on ``--max-iterations``, a ceiling of the spec or a met stop condition
(:func:`.spend.spend_report` says ``stop``, or one more iteration does not fit), nothing left
failing on val, or — with ``--convergence`` — a plateau (:func:`.prompt.convergence`).
``--resume`` finishes an iteration a kill cut off: an undecided one re-runs its gate session on
the same work copy (paying only the rollouts that are missing); a decided one is never decided
again. Never imports pytest: the gate session is a child process.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._policy import Refusal
from .._policy.commit import (
    INDECISIVE,
    CommitRefused,
    OptimizerSpend,
    book,
)
from .._policy.spend import missing_rollouts, spend_report
from .._project.adapter import AdapterError, load_adapter, load_tasks
from .._project.candidate import HANDOVER, SEED_TAG, CandidateError
from .._project.microcase_gen import redact
from .._project.paths import to_stored
from .._project.spec import SpecError, load_spec, resolve_spec_path
from .._project.tamper import expand, protected_digests, tampered
from .._project.yamlfile import YamlError, read_yaml
from .._store.files import atomic_write_json, atomic_write_text, read_json
from .._store.rundir import RunDir, RunDirError
from .._store.seal import Seal
from .diagnose import diagnose
from .git_store import (
    CandidateStore,
    StoreError,
    open_store,
    unified_diff,
)
from .launch import gate_flags, run_logged, session_command
from .prompt import (
    DEFAULT_INSTRUCTIONS,
    FOCUS_MODES,
    PromptInputs,
    convergence,
    focus_tasks,
    render_prompt,
)
from .work import JOURNAL, new_work_copy

PREFIX = "cand_"
DEFAULT_OPTIMIZER_TIMEOUT = 1800.0
# Flags that become `-o capevolve_<key>=...` for the gate session, honoured only where the spec
# does not set the key itself (the spec wins over ini defaults).
INI_FLAGS = {"n_trials": "num_trials", "gate_mode": "gate_mode", "k_se": "gate_k_se", "alpha": "gate_alpha"}


class LoopIncomplete(Exception):
    """An evaluation did not complete (no verdict); ``--resume`` continues it."""


@dataclass
class Options:
    """``capevolve hill-climb``'s flags (None: the spec's default, else the built-in one)."""

    project: Path
    optimizer: str | None = None
    focus: str | None = None
    max_iterations: int | None = None
    resume: bool = False
    n_trials: int | None = None
    gate_mode: str | None = None
    k_se: float | None = None
    alpha: float | None = None
    no_regression: bool = False
    protected_paths: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    convergence: bool = False
    workers: int = 0
    store: str | None = None
    store_commit_cmd: str | None = None
    instructions_file: Path | None = None
    optimizer_timeout: float = DEFAULT_OPTIMIZER_TIMEOUT
    run_id: str | None = None
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))


def cid_of(n: int) -> str:
    return f"{PREFIX}{n:04d}"


def _number(cid: str) -> int:
    return int(cid[len(PREFIX) :])


class HillClimb:
    """One ``capevolve hill-climb`` invocation: check the flags, then iterate until a stop."""

    def __init__(self, options: Options) -> None:
        self.o = options
        self.spec_path = resolve_spec_path(options.project)
        self.ini = self._ini_overrides()
        try:
            self.spec = load_spec(self.spec_path, self.ini)
        except SpecError as exc:
            raise Refusal(str(exc)) from None
        self.optimizer = options.optimizer or self.spec.optimizer
        if not self.optimizer:
            raise Refusal(
                "no optimizer: give --optimizer 'CMD … {workdir} … {prompt}' (or the spec's `optimizer`)"
            )
        if "{workdir}" not in self.optimizer:
            raise Refusal(
                f"--optimizer {self.optimizer!r} never names {{workdir}}: it could not edit the candidate"
            )
        self.focus = options.focus or self.spec.algorithm_focus or "all"
        if self.focus not in FOCUS_MODES:
            raise Refusal(f"--focus {self.focus!r}: use one of {', '.join(FOCUS_MODES)}")
        self.store_kind = options.store or self.spec.store or "git"
        if options.optimizer_timeout <= 0:
            raise Refusal(f"--optimizer-timeout {options.optimizer_timeout:g}: give a number of seconds > 0")
        if options.max_iterations is not None and options.max_iterations < 0:
            raise Refusal(f"--max-iterations {options.max_iterations}: give 0 or more")
        self.template = DEFAULT_INSTRUCTIONS
        if options.instructions_file is not None:
            try:
                self.template = options.instructions_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise Refusal(f"--instructions-file {options.instructions_file}: {exc}") from None
        self.extra_protected: tuple[str, ...] = ()
        if options.protected_paths:
            self.extra_protected = expand(options.protected_paths, self.spec.adapter)
        self.rundir: RunDir | None = None
        self.store: CandidateStore | None = None

    # -- flags the gate session must honour ---------------------------------------------------------

    def _ini_overrides(self) -> dict[str, str]:
        """The flags passed to the gate session as ini defaults; refused where the spec sets
        the same key to another value (the spec wins, so the flag could not be honoured)."""
        try:
            raw = read_yaml(self.spec_path) or {}
        except YamlError as exc:
            raise Refusal(str(exc)) from None
        out: dict[str, str] = {}
        for flag, key in INI_FLAGS.items():
            value = getattr(self.o, flag)
            if value is None:
                continue
            if isinstance(raw, dict) and key in raw and raw[key] != value:
                raise Refusal(
                    f"--{flag.replace('_', '-')} {value}: the spec {self.spec_path} sets {key}: {raw[key]}, "
                    "and the spec wins over what a flag can pass to the gate session; edit the spec instead"
                )
            out[key] = str(value)
        return out

    def _session_args(self, rundir: RunDir | None) -> list[str]:
        run_id = rundir.run_id if rundir is not None else None
        return session_command(self.spec_path, run_id=run_id, workers=self.o.workers, ini=self.ini)

    def _session(self, args: list[str], log_path: Path) -> int:
        return run_logged(args, self.spec.project_dir, log_path)

    # -- the run and its baseline ---------------------------------------------------------------------

    def _baseline(self) -> RunDir:
        """The run, with the best's val rollouts complete; runs a plain evaluation when not."""
        try:
            rundir = RunDir.resolve(self.spec.project_dir, self.o.run_id, create=False)
        except RunDirError:
            if self.o.run_id is not None:
                raise Refusal(f"no run {self.o.run_id!r} in {self.spec.project_dir}") from None
            rundir = None
        if rundir is not None and self._has_baseline(rundir):
            return rundir
        self.o.log("no baseline yet (the best's val rollouts): running a plain evaluation session")
        log = (
            rundir.hill_climb_dir() if rundir is not None else self.spec.project_dir / ".capevolve"
        ) / "baseline.log"
        code = self._session(self._session_args(rundir), log)
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
        splits = rundir.splits()
        if splits is None:
            return False
        from .._store.evidence import index_records

        records = index_records(rundir.rollouts.indexed_rollouts("val", [rundir.state.best()]))
        return (
            missing_rollouts(records, [rundir.state.best()], list(splits["val"]), self.spec.num_trials) == 0
        )

    # -- the loop -----------------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        rundir = self.rundir = self._baseline()
        if Seal(rundir).burned() is not None:
            raise Refusal(
                f"run {rundir.run_id} is finalized: its test split was scored, so a new best chosen in it "
                "would not be held out; start a new run (pytest --capevolve-run PROJECT --capevolve-new-run)"
            )
        try:
            self.store = open_store(
                self.store_kind, rundir.root, command=self.o.store_commit_cmd, cwd=self.spec.project_dir
            )
        except StoreError as exc:
            raise Refusal(str(exc)) from None
        self._store_seed()
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
            self._iterate(cid, resume=True)
        stop = None
        while stop is None:
            stop = self._stop_reason()
            if stop is None:
                self._iterate(cid_of(len(self._iterations()) + 1), resume=False)
        return self._summary(stop)

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

    def _stop_reason(self) -> str | None:
        rundir = self._rundir
        done = len(self._iterations())
        if self.o.max_iterations is not None and done >= self.o.max_iterations:
            return f"max iterations: {done} of --max-iterations {self.o.max_iterations}"
        report = spend_report(self.spec, rundir, n_siblings=1)
        if report["recommendation"]["action"] == "stop":
            return f"spend: {report['recommendation']['reason']}"
        if report["afford"]["affordable"] is False:
            return "spend: one more iteration does not fit: " + "; ".join(
                b["message"] for b in report["afford"]["blockers"]
            )
        stall = int(rundir.state.read_state().get("stall", 0))
        if self.o.convergence and convergence(stall) == "stop":
            return f"convergence: stop (stall {stall}: a long plateau)"
        rows = diagnose(self.spec, rundir, rundir.state.best())["tasks"]
        if not focus_tasks(rows, "all", 1):
            return f"nothing fails on val: best {rundir.state.best()!r} passes every val task"
        return None

    # -- one iteration ---------------------------------------------------------------------------------------

    def _iterate(self, cid: str, *, resume: bool) -> None:
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
            rundir.log.append_event("hill_climb_iteration", tag=cid, parent=meta["parent"], phase="started")
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

    def _propose(self, cid: str, meta: dict[str, Any], folder: Path, workdir: Path) -> None:
        """Write the prompt and the handover files, run the optimizer, clean the work copy."""
        rundir = self._rundir
        parent = meta["parent"]
        report = diagnose(self.spec, rundir, parent)
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
            examples=self._examples(parent),
            focus_mode=self.focus,
            focus=focus,
            stall=meta["stall"],
            capabilities=self.o.capabilities,
        )
        atomic_write_text(prompt, render_prompt(inputs, self.template))
        self._handover(cid, workdir)

        argv = [
            part.replace("{workdir}", str(workdir)).replace("{prompt}", str(prompt))
            for part in shlex.split(self.optimizer or "")
        ]
        result = self._run_optimizer(argv, folder)
        if not result["ok"]:
            self.o.log(
                f"{cid}: optimizer {result['outcome']}: the candidate is an unchanged copy of {parent}"
            )
            self._restore(workdir, parent)
        journal = workdir / JOURNAL
        if journal.is_file():
            shutil.copy2(journal, folder / JOURNAL)
        for name in HANDOVER:
            path = workdir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        atomic_write_text(folder / "diff.patch", unified_diff(self._source(parent), workdir, parent, cid))
        atomic_write_json(folder / "optimizer.json", result)  # the marker: the proposal is complete
        self._rundir.log.append_event(
            "hill_climb_iteration", tag=cid, phase="proposed", optimizer=result["outcome"]
        )

    def _run_optimizer(self, argv: list[str], folder: Path) -> dict[str, Any]:
        start = time.monotonic()
        timed_out = False
        code: int | None = None
        error = None
        with open(folder / "optimizer.stdout", "w") as out, open(folder / "optimizer.stderr", "w") as err:
            try:
                proc = subprocess.Popen(
                    argv, cwd=self.spec.project_dir, stdout=out, stderr=err, start_new_session=True
                )
            except OSError as exc:
                error = f"could not start: {exc}"
            else:
                try:
                    code = proc.wait(timeout=self.o.optimizer_timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    code = proc.wait()
        seconds = time.monotonic() - start
        if error is not None:
            outcome = error
        elif timed_out:
            outcome = f"timed out after {self.o.optimizer_timeout:g} s (process group killed)"
        elif code != 0:
            outcome = f"exited {code}"
        else:
            outcome = "ok"
        return {
            "argv": argv,
            "exit_code": code,
            "timed_out": timed_out,
            "seconds": round(seconds, 3),
            "outcome": outcome,
            "ok": outcome == "ok",
        }

    def _source(self, tag: str) -> Path:
        return self.spec.capability_path if tag == SEED_TAG else self._rundir.snapshots.snapshot_dir(tag)

    def _restore(self, workdir: Path, parent: str) -> None:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.copytree(
            self._source(parent), workdir, ignore=shutil.ignore_patterns("__pycache__", *HANDOVER)
        )

    def _examples(self, parent: str) -> dict[str, dict[str, str]]:
        """Per failing task, the first failing rollout of the parent: its feedback (the gold
        answer redacted) and its path; an infra-errored task gets its error instead."""
        try:
            pool = load_tasks(load_adapter(self.spec.adapter, self.spec.project_dir), self.spec.adapter)
        except AdapterError:
            pool = {}
        out: dict[str, dict[str, str]] = {}
        threshold = self.spec.success_threshold
        # the parent's outcomes from the index, in the rollout files' order; a failing rollout's
        # feedback from its file, read only for the one shown per task
        rundir = self._rundir
        indexed = sorted(
            rundir.rollouts.indexed_rollouts("val", [parent]),
            key=lambda r: rundir.rollout_path("val", r.task_id, r.tag, r.trial).name,
        )
        for record in indexed:
            if record.task_id in out:
                continue
            path = to_stored(
                rundir.rollout_path("val", record.task_id, record.tag, record.trial), self.spec.project_dir
            )
            task = pool.get(record.task_id)
            gold = None if task is None else task.target
            if not record.valid:
                out[record.task_id] = {
                    "feedback": f"INFRA: {redact(str(record.infra_error), gold)}",
                    "rollout": path,
                }
            elif not (record.passed if record.passed is not None else (record.reward or 0.0) >= threshold):
                full = rundir.rollouts.read_rollout("val", record.task_id, record.tag, record.trial)
                if full is not None:
                    out[record.task_id] = {
                        "feedback": redact(str(full.feedback or ""), gold),
                        "rollout": path,
                    }
        return out

    def _handover(self, cid: str, workdir: Path) -> None:
        """The optimizer's context in the work copy: the ledger (read-only), the rejected
        memory, a map of the run, and each earlier iteration's diff and outcome."""
        rundir = self._rundir
        for name in ("LEDGER.md", "rejected.jsonl"):
            source = rundir.root / name
            target = workdir / name
            if source.is_file():
                shutil.copyfile(source, target)
            else:
                target.write_text("" if name.endswith(".jsonl") else "# Ledger\n\nNo decision yet.\n")
            target.chmod(0o444)
        prior = workdir / "prior_iterations"
        for earlier in self._iterations():
            if earlier == cid:
                continue
            src = rundir.hill_climb_dir(earlier)
            dest = prior / earlier
            dest.mkdir(parents=True, exist_ok=True)
            for name in ("diff.patch", "outcome.json"):
                if (src / name).is_file():
                    shutil.copyfile(src / name, dest / name)
        root = to_stored(rundir.root, self.spec.project_dir)
        atomic_write_text(
            workdir / "RUNMAP.md",
            f"# Where things are (run {rundir.run_id})\n\n"
            f"- this work copy (edit it): `{workdir}` — a copy of the best, `{rundir.state.best()}`\n"
            f"- the prompt of this iteration: `{root}/hill_climb/{cid}/prompt.md`\n"
            f"- rollouts (input, output, feedback): `{root}/rollouts/val/<task>__<tag>__t<k>.json`\n"
            f"- verdicts (every number a decision rests on): `{root}/verdicts/<tag>.json`\n"
            f"- snapshots of every evaluated candidate: `{root}/candidates/<tag>/files/`\n"
            "- `LEDGER.md`: one row per decision (read-only copy)\n"
            "- `rejected.jsonl`: what was refuted, against which parent, which files, which tasks\n"
            "- `prior_iterations/<cid>/`: each earlier iteration's diff.patch and outcome.json\n"
            "- `JOURNAL.md`: your notes; kept with the iteration, never part of the candidate\n",
        )

    # -- evaluation and decision ---------------------------------------------------------------------------

    def _evaluate(self, cid: str, meta: dict[str, Any], folder: Path, workdir: Path) -> None:
        """The guards and the val gate: a gate session on the work copy, then the booking."""
        rundir = self._rundir
        if (
            rundir.verdicts.verdict(cid) is None
            and self.extra_protected
            and self._tampered_extra(cid, meta, workdir)
        ):
            pass
        elif rundir.verdicts.verdict(cid) is None:
            args = self._session_args(rundir)
            args += gate_flags(workdir, cid, veto_regressions=self.o.no_regression)
            self.o.log(f"{cid}: gate session (parent {meta['parent']})")
            code = self._session(args, folder / "gate.log")
            if rundir.verdicts.verdict(cid) is None:
                raise LoopIncomplete(
                    f"the gate session of {cid} exited {code} without a verdict (see {folder / 'gate.log'}); "
                    "what it paid is kept: continue with capevolve hill-climb --resume"
                )
        verdict = rundir.verdicts.verdict(cid) or {}
        decision = verdict.get("decision")
        if decision == "accept":
            booked, basis = "accept", None
        elif decision == "reject":
            booked, basis = (
                "reject",
                "micro_test_fail" if verdict.get("basis") == "micro_test_fail" else "gate",
            )
        else:
            booked, basis = INDECISIVE, verdict.get("basis")
        optimizer = read_json(folder / "optimizer.json")
        note = (
            f"hill-climb iter {meta['iteration']} ({meta['focus_mode']}; optimizer {optimizer['outcome']}): "
        )
        try:
            book(
                self.spec,
                rundir,
                cid,
                booked,
                basis=basis,
                note=note + str(verdict.get("reason", "")),
                optimizer=OptimizerSpend(seconds=float(optimizer.get("seconds", 0.0))),
            )
        except CommitRefused:
            if not self._decided(cid):
                raise

    def _tampered_extra(self, cid: str, meta: dict[str, Any], workdir: Path) -> bool:
        """--protected-paths: globs checked by the loop itself, beside the spec's; a change
        makes the candidate indecisive (basis tamper) before any session pays for it."""
        from .._decide.verdict import refusal
        from .._policy.verdicts import gate_config, verdict_file

        try:
            changes = tampered(
                protected_digests(self._source(SEED_TAG), self.extra_protected), workdir, self.extra_protected
            )
        except CandidateError as exc:
            changes = [str(exc)]
        if not changes:
            return False
        verdict = refusal(
            tag=cid,
            against=meta["parent"],
            decision="indecisive",
            basis="tamper",
            reason=f"never scored: it changes a path --protected-paths protects ({'; '.join(changes[:5])})",
            config=gate_config(self.spec),
            details={
                "changed_paths": changes,
                "protected_paths": list(self.extra_protected),
                "source": str(workdir),
            },
        )
        self._rundir.verdicts.write_verdict(verdict_file(verdict, null_control=False))
        return True

    def _finish(self, cid: str) -> None:
        """The outcome file and the candidate store, once per decided iteration."""
        rundir = self._rundir
        entry = self._decided(cid)
        assert entry is not None
        folder = rundir.hill_climb_dir(cid)
        meta = dict(read_json(folder / "iteration.json"))
        verdict = rundir.verdicts.verdict(cid) or {}
        word = {"accept": "ACCEPT"}.get(entry["decision"], entry["decision"])
        delta, p = entry.get("delta_mean"), entry.get("p_value")
        parts = [] if delta is None else [f"Δ̄={round(delta, 4) + 0.0:+.4f}"]  # never "-0.0000"
        parts += [] if p is None else [f"p={p:.4g}"]
        numbers = ", ".join(parts)
        reason = str(verdict.get("reason", "")).strip()
        message = f"iter {meta['iteration']}: {word} {cid} vs {entry.get('parent')}"
        message += f" ({numbers})" if numbers else ""
        message += f" — {entry.get('basis')}" if entry.get("basis") else ""
        message += f": {reason}" if reason else ""
        snapshot = rundir.snapshots.snapshot_dir(cid)
        files = snapshot if snapshot.is_dir() else rundir.work_dir(cid)
        assert self.store is not None
        ref = self.store.record(cid, files, message, accepted=entry["decision"] == "accept")
        outcome = {
            "iteration": meta["iteration"],
            "tag": cid,
            "parent": entry.get("parent"),
            "decision": entry["decision"],
            "basis": entry.get("basis"),
            "delta_mean": entry.get("delta_mean"),
            "p_value": entry.get("p_value"),
            "reason": reason,
            "changed_files": entry.get("changed_files", []),
            "focus": meta.get("focus", []),
            "optimizer": read_json(folder / "optimizer.json").get("outcome")
            if (folder / "optimizer.json").is_file()
            else None,
            "store": self.store_kind,
            "store_ref": ref,
            "message": message,
        }
        if not (folder / "outcome.json").is_file():
            atomic_write_json(folder / "outcome.json", outcome)
            self.o.log(message)

    def _store_seed(self) -> None:
        assert self.store is not None
        rundir = self._rundir
        if self.store.holds(SEED_TAG):
            return
        snapshot = rundir.snapshots.snapshot_dir(SEED_TAG)
        files = snapshot if snapshot.is_dir() else self.spec.capability_path
        self.store.record(SEED_TAG, files, "iter 0: seed (the baseline)", accepted=True)

    def _summary(self, stop: str) -> dict[str, Any]:
        rundir = self._rundir
        state = rundir.state.read_state()
        rows = []
        for cid in self._iterations():
            path = rundir.hill_climb_dir(cid) / "outcome.json"
            if path.is_file():
                out = read_json(path)
                rows.append(
                    {
                        k: out.get(k)
                        for k in ("tag", "decision", "basis", "delta_mean", "p_value", "optimizer")
                    }
                )
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
        rundir.log.append_event("hill_climb_stopped", reason=stop, best=state["best_id"])
        self.o.log(f"stopped: {stop}")
        return summary
