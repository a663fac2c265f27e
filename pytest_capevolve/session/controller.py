"""The controller role: owns the run dir, decides the plan, persists what workers report.

Registered in ``pytest_configure`` of the process that is not an xdist worker (the only
process without xdist). Workers never see this object; they get the plan through
``workerinput`` and return records inside their reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..decide.evidence import index_records
from ..decide.gate import INDECISIVE, REJECT, Verdict, refusal
from ..decide.judging import Evidence, as_null, gate_config, null_deltas, write_verdict
from ..items import record_from_report
from ..project.candidate import SEED_TAG, CandidateError, check_tag
from ..project.checks import ProjectEnv
from ..project.checks import run as run_microcase
from ..project.microcase import Microcase, refuse_test_tasks
from ..project.microcase import load_project as load_microcases
from ..project.spec import Spec
from ..project.splits import splits_for
from ..project.tamper import expand, protected_digests, tampered
from ..show.measure import measure, render_markdown
from ..show.report import ArmSummary, render_arms, render_verdicts, summarize_arm
from ..store.rundir import RunDir, RunDirError
from ..store.seal import Seal
from . import exitcodes
from .plan import WORKERINPUT_KEY, EvalPlan, PlannedCandidate


@dataclass
class CandidateRequest:
    """A candidate asked for on the command line (or the best, implicitly)."""

    tag: str
    path: Path


@dataclass(frozen=True)
class GateRequest:
    """--capevolve-gate and its companions; ``nulls`` is how many null controls to keep."""

    enabled: bool = False
    nulls: int = 0
    veto_regressions: bool = False


@dataclass
class SessionTally:
    paid: dict[str, int] = field(default_factory=dict)
    infra: list[tuple[str, str]] = field(default_factory=list)  # (nodeid, reason)
    lost: list[tuple[str, str]] = field(default_factory=list)  # items that never reported
    dead_workers: list[tuple[str, str]] = field(default_factory=list)


def location_for(path: Path, project_dir: Path) -> str:
    """Relative to the project when inside it, so a worker on a copy of the project (rsync,
    another machine) finds the candidate in its own copy."""
    path = path.resolve()
    return path.relative_to(project_dir).as_posix() if path.is_relative_to(project_dir) else str(path)


def next_free_tag(base: str, taken: set[str]) -> str:
    n = 2
    while f"{base}-r{n}" in taken:
        n += 1
    return f"{base}-r{n}"


class Controller:
    def __init__(
        self,
        config: pytest.Config,
        spec: Spec,
        rundir: RunDir,
        pool_ids: list[str],
        requests: list[CandidateRequest],
        split: str,
        rerun: bool,
        gate: GateRequest | None = None,
    ) -> None:
        self._setup(config, spec, rundir, gate)
        self.plan = self._make_plan(pool_ids, requests, split, rerun)

    def _setup(self, config: pytest.Config, spec: Spec, rundir: RunDir, gate: GateRequest | None) -> None:
        self.config = config
        self.gate = gate or GateRequest()
        self.verdicts: list[Any] = []
        self.null_tags: list[str] = []
        self.spec = spec
        self.rundir = rundir
        self.tally = SessionTally()
        self.rows: list[ArmSummary] = []
        self.exit_code: int | None = None
        self.session: pytest.Session | None = None
        self.missing: list[Any] = []
        self.refusals: list[Verdict] = []  # decided before any rollout (tamper, microcases)
        self.report_error: str | None = None
        self.records: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}  # this split, after the loop
        self.microcases: list[Microcase] = []
        self.microcase_env = ProjectEnv(spec)  # the project's adapter, loaded on first need
        self._protected = expand(spec.protected_paths, spec.adapter)
        self._seed_protected: dict[str, str] | None = None

    # -- planning (configure time) ---------------------------------------------------------

    def _make_plan(
        self, pool_ids: list[str], requests: list[CandidateRequest], split: str, rerun: bool
    ) -> EvalPlan:
        spec, rundir = self.spec, self.rundir
        rundir.ensure_spec_lock(spec)
        if self.gate.enabled and Seal(rundir).burned() is not None:
            raise RunDirError(
                f"run {rundir.run_id} is finalized: its test split was scored, so choosing a new "
                "best in it would select on held-out knowledge; start a new run (--capevolve-new-run)"
            )
        splits = rundir.ensure_splits(lambda: splits_for(spec, pool_ids))
        task_ids = self._frozen_ids(splits, split, pool_ids)
        best = str(rundir.read_state().get("best_id", SEED_TAG))
        best_path = self._source_of(best)
        taken = set(rundir.known_tags())
        wanted = requests or [CandidateRequest(best, best_path)]
        chosen: list[CandidateRequest] = []
        for request in wanted:
            tag = check_tag(request.tag)
            if rerun:
                tag = next_free_tag(tag, taken)
                taken.add(tag)
            chosen.append(CandidateRequest(tag, request.path))
        if best not in {c.tag for c in chosen}:
            chosen.insert(0, CandidateRequest(best, best_path))
        if len({c.tag for c in chosen}) != len(chosen):
            raise CandidateError("two candidates share a tag; give each its own --capevolve-tag")
        self.best = best
        # Screens run before anything is registered or paid: a refused candidate costs nothing.
        if self.gate.enabled:
            self.microcases = load_microcases(spec.project_dir)
            refuse_test_tasks(self.microcases, splits["test"])
        chosen = [c for c in chosen if c.tag in (best, SEED_TAG) or not self._refused(c)]

        planned = []
        for request in chosen:
            digest = rundir.register_candidate(request.tag, request.path)
            planned.append(
                PlannedCandidate(request.tag, location_for(request.path, spec.project_dir), digest)
            )
        # Null controls: byte-identical copies of the best, evaluated from their snapshots
        # under fresh tags. Their tags derive from the best, so they are reused until it changes.
        for i in range(1, self.gate.nulls + 1):
            tag = f"{best}-null{i}"
            digest = rundir.register_candidate(tag, best_path)
            snapshot = rundir.candidate_dir(tag) / "files"
            planned.append(PlannedCandidate(tag, location_for(snapshot, spec.project_dir), digest))
            self.null_tags.append(tag)
        return self._build_plan(split, task_ids, planned, rundir.iter_rollouts(split), "session_started")

    def _build_plan(
        self,
        split: str,
        task_ids: list[str],
        planned: list[PlannedCandidate],
        records: Iterable[dict[str, Any]],
        event: str,
        **fields: Any,
    ) -> EvalPlan:
        """The plan over ``planned``, owing every rollout not already persisted valid in
        ``records``; checked against the budget and logged as ``event``."""
        tags = {c.tag for c in planned}
        persisted = {
            (r["split"], r["task_id"], r["tag"], int(r["trial"]))
            for r in records
            if r["tag"] in tags and r.get("infra_error") is None
        }
        plan = EvalPlan(
            run_id=self.rundir.run_id,
            split=split,
            task_ids=task_ids,
            num_trials=self.spec.num_trials,
            base_seed=self.spec.base_seed,
            candidates=planned,
            persisted=persisted,
        )
        owed = len(plan.owed_keys())
        self._check_budget(owed)
        self.rundir.append_event(
            event, split=split, tags=sorted(tags), owed=owed, reused=len(plan.all_keys()) - owed, **fields
        )
        return plan

    def _refused(self, request: CandidateRequest) -> bool:
        """Screens before any rollout: the tamper guard (always), then the project's
        microcases (when gating). A refusal is recorded as a verdict."""
        return self._tampered(request) or self._fails_microcases(request)

    def _fails_microcases(self, request: CandidateRequest) -> bool:
        if not self.microcases:
            return False
        failed = []
        for case in self.microcases:
            outcome = run_microcase(case, request.path, self.microcase_env)
            if not outcome.ok:
                failed.append(
                    {"id": case.id, "cluster": case.cluster, "expected": outcome.expected, "got": outcome.got}
                )
        self.rundir.append_event(
            "microcases", tag=request.tag, ran=len(self.microcases), failed=[f["id"] for f in failed]
        )
        if failed:
            first = failed[0]
            self._refuse(
                request,
                REJECT,
                "micro_test_fail",
                f"failed {len(failed)} of {len(self.microcases)} microcases before any rollout: "
                f"{first['id']} (cluster {first['cluster']}) expected {first['expected']}, "
                f"got {first['got']}",
                {"failed_microcases": failed, "microcases_run": len(self.microcases)},
            )
        return bool(failed)

    def _tampered(self, request: CandidateRequest) -> bool:
        if self._seed_protected is None:
            # hashed once per session: the seed is the reference for every candidate
            seed_snapshot = self.rundir.candidate_dir(SEED_TAG) / "files"
            seed = seed_snapshot if seed_snapshot.is_dir() else self.spec.capability_path
            self._seed_protected = protected_digests(seed, self._protected)
        changes = tampered(self._seed_protected, request.path, self._protected)
        if changes:
            shown = "; ".join(changes[:5]) + (f"; and {len(changes) - 5} more" if len(changes) > 5 else "")
            self._refuse(
                request,
                INDECISIVE,
                "tamper",
                f"never scored: it changes what scores it ({shown})",
                {
                    "changed_paths": changes,
                    "protected_paths": list(self._protected),
                    "source": str(request.path),
                },
            )
        return bool(changes)

    def _refuse(
        self, request: CandidateRequest, decision: str, basis: str, reason: str, details: dict[str, Any]
    ) -> None:
        """Record a verdict reached before any rollout; written with the others at the end."""
        self.refusals.append(
            refusal(
                tag=request.tag,
                against=self.best,
                decision=decision,
                basis=basis,
                reason=reason,
                config=gate_config(self.spec),
                details=details,
            )
        )

    def _frozen_ids(self, splits: dict[str, Any], split: str, pool_ids: list[str]) -> list[str]:
        task_ids = list(splits[split])
        missing = sorted(set(task_ids) - set(pool_ids))
        if missing:
            raise CandidateError(
                f"run {self.rundir.run_id}: the frozen {split} split names tasks the adapter no "
                f"longer returns: {', '.join(map(repr, missing[:5]))}"
            )
        return task_ids

    def _source_of(self, tag: str) -> Path:
        if tag == SEED_TAG:
            return self.spec.capability_path
        return self.rundir.candidate_source(tag)  # resolved in the project's current folder

    def _check_budget(self, owed: int) -> None:
        cap = self.spec.max_metric_calls
        if cap is None:
            return
        spent = int(self.rundir.read_state()["spent"]["metric_calls"])
        if spent + owed > cap:
            raise pytest.UsageError(
                f"{self.spec.path}: this session owes {owed} rollouts but the run has spent "
                f"{spent} of max_metric_calls={cap}; raise max_metric_calls or evaluate fewer "
                "candidates/trials"
            )

    # -- hooks ---------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Controller → each xdist worker: the plan, decided once here."""
        node.workerinput[WORKERINPUT_KEY] = json.dumps(self.plan.to_wire())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Persist each rollout exactly once, as its report arrives (xdist replays worker
        reports here, so one code path serves both modes)."""
        record = record_from_report(report)
        if record is not None and report.when == "call":
            self._persist(record)
            if record["infra_error"]:
                self.tally.infra.append((report.nodeid, record["infra_error"]))
        elif record is None and report.failed:
            reason = str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "?"
            self.tally.lost.append((report.nodeid, reason))

    def _persist(self, record: dict[str, Any]) -> None:
        state = self.rundir.record_rollout(record)
        tag = record["tag"]
        self.tally.paid[tag] = self.tally.paid.get(tag, 0) + 1
        cap = self.spec.max_usd
        if cap is not None and state["spent"]["usd"] > cap:
            self._stop(f"budget max_usd={cap} spent ({state['spent']['usd']:.4f} USD)")

    def _stop(self, reason: str) -> None:
        if self.session is not None:
            self.session.shouldstop = reason
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None:
            dsession.shouldstop = reason

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if error:
            self.tally.dead_workers.append((node.gateway.id, str(error)))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        result = yield
        if not self.config.option.collectonly:
            self.finish()
        return result

    def finish(self) -> None:
        """After the run loop: summarize from what is persisted and choose the exit code."""
        records = index_records(self._read_records())
        self._summarize(records)
        judged = self._judge(records) if self.gate.enabled else []
        for verdict in self.refusals:
            write_verdict(self.rundir, verdict, {"null_control": False})
        self.verdicts = self.verdicts + self.refusals
        decisions = {v.decision for v in [*judged, *self.refusals]}
        if self.exit_code == exitcodes.OK:
            if INDECISIVE in decisions:
                self.exit_code = exitcodes.INDECISIVE
            elif REJECT in decisions:
                self.exit_code = exitcodes.REJECTED
        self._log_finish()

    def _read_records(self) -> Iterator[dict[str, Any]]:
        return self.rundir.iter_rollouts(self.plan.split)

    def _summarize(self, records: dict[str, dict[tuple[str, int], dict[str, Any]]]) -> None:
        """The per-tag rows, the planned rollouts still missing, and the exit code they imply."""
        plan = self.plan
        self.records = records
        reused_by_tag: dict[str, int] = {}
        for _split, _task, tag, _k in plan.persisted:
            reused_by_tag[tag] = reused_by_tag.get(tag, 0) + 1
        self.rows = [
            summarize_arm(
                records.get(c.tag, {}),
                tag=c.tag,
                split=plan.split,
                task_ids=plan.task_ids,
                num_trials=plan.num_trials,
                paid=self.tally.paid.get(c.tag, 0),
                reused=reused_by_tag.get(c.tag, 0),
            )
            for c in plan.candidates
        ]
        self.missing = [
            k
            for k in plan.all_keys()
            if (rec := records.get(k.tag, {}).get((k.task_id, k.trial))) is None
            or rec.get("infra_error") is not None
        ]
        failed = self.missing or self.tally.dead_workers
        self.exit_code = exitcodes.INFRA_FAILURE if failed else exitcodes.OK

    def _log_finish(self) -> None:
        self.rundir.append_event(
            "session_finished",
            paid=sum(self.tally.paid.values()),
            missing=len(self.missing),
            dead_workers=[w for w, _ in self.tally.dead_workers],
            exit_code=self.exit_code,
        )
        try:
            known = {self.plan.split: self.records}
            self.rundir.write_report(render_markdown(measure(self.spec, self.rundir, known)))
        except Exception as exc:  # the report is a view; it must never change the outcome
            self.report_error = f"could not write report.md: {exc!r}"

    def _judge(self, records: dict[str, dict[tuple[str, int], dict[str, Any]]]) -> list[Verdict]:
        """Gate every candidate against the best on val; write verdicts; promote a winner.
        Returns the candidates' verdicts (not the null controls')."""
        config = gate_config(self.spec, veto_regressions=self.gate.veto_regressions)
        evidence = Evidence(self.rundir, self.plan.task_ids, self.plan.num_trials, records)
        nulls = [as_null(evidence.judge(tag, self.best, config)) for tag in self.null_tags]
        floor = null_deltas(nulls)
        others = [c.tag for c in self.plan.candidates if c.tag != self.best and c.tag not in self.null_tags]
        verdicts = [evidence.judge(tag, self.best, config, floor) for tag in others]
        for verdict in nulls:
            write_verdict(self.rundir, verdict, {"null_control": True})
        for verdict in verdicts:
            write_verdict(self.rundir, verdict, {"null_control": False, "nulls": self.null_tags})
        self.verdicts = nulls + verdicts
        accepted = [v for v in verdicts if v.decision == "accept"]
        if accepted:
            winner = max(accepted, key=lambda v: v.delta_mean or 0.0)

            def promote(state: dict[str, Any]) -> None:
                state["best_id"] = winner.tag
                state["iterations"] = int(state["iterations"]) + 1
                state["stall"] = 0

            self.rundir.update_state(promote)
            self.rundir.append_event("best_changed", best_id=winner.tag, previous=self.best)
        elif verdicts:
            self.rundir.update_state(lambda s: s.update(stall=int(s["stall"]) + 1))
        return verdicts

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.exit_code is not None and session.exitstatus in exitcodes.REPLACEABLE:
            session.exitstatus = self.exit_code

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        try:
            self._print_summary(terminalreporter)
        except Exception as exc:  # a summary must never break the session's outcome
            terminalreporter.write_line(f"capevolve: could not print the summary: {exc!r}")

    def _print_summary(self, tr: Any) -> None:
        if not self.rows:
            return
        tr.section(f"capevolve run {self.plan.run_id}", sep="=")
        for line in render_arms(self.rows):
            tr.write_line(line)
        if self.verdicts:
            tr.section(f"capevolve verdicts vs {self.best} (val)", sep="-")
            for line in render_verdicts(self.verdicts):
                tr.write_line(line)
            for verdict in self.verdicts:
                for warning in verdict.warnings:
                    tr.write_line(f"{verdict.tag}: {warning}", red=True)
        paid = sum(r.paid for r in self.rows)
        reused = sum(r.reused for r in self.rows)
        tr.write_line(f"rollouts: {paid} paid, {reused} reused; run dir: {self.rundir.root}")
        if self.report_error:
            tr.write_line(f"capevolve: {self.report_error}", yellow=True)
        if self.tally.infra:
            tr.write_line(f"infra errors ({len(self.tally.infra)}; missing data, never a 0):")
            for nodeid, reason in self.tally.infra[:20]:
                tr.write_line(f"  {nodeid}: {reason}")
        for worker, error in self.tally.dead_workers:
            tr.write_line(f"worker {worker} died ({error}); its rollouts are missing", red=True)
        for nodeid, reason in self.tally.lost[:20]:
            tr.write_line(f"no rollout from {nodeid}: {reason}", red=True)
        if self.missing:
            tr.write_line(
                f"{len(self.missing)} rollouts are missing; re-run the same command to complete only those",
                yellow=True,
            )
