"""pytest-capevolve: options, ini keys and hook wiring. Thin on purpose.

A capevolve session is ``pytest --capevolve-run PROJECT``: the project's spec becomes the only
thing collected, each owed rollout an item. The controller role (see :mod:`controller`) is
registered in the process that owns the run dir; xdist workers only run items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .items import CONTEXT_KEY, EvalContext, MicrocaseFile, SpecFile, record_from_report
from .project.adapter import AdapterError, AdapterRunner, load_adapter, load_tasks
from .project.candidate import SEED_TAG, CandidateError
from .project.microcase import MicrocaseError, is_microcase_file
from .project.spec import INI_KEYS, Spec, SpecError, load_spec
from .project.splits import TestSealError
from .session.controller import CandidateRequest, Controller, GateRequest
from .session.finalize import FinalizeController
from .session.plan import WORKERINPUT_KEY, EvalPlan
from .store.rundir import RunDir, RunDirError

EVALUABLE_SPLITS = ("train", "val")


def _split_option(value: str) -> str:
    if value == "test":
        raise pytest.UsageError(
            "--capevolve-split test: the test split is sealed; it is scored once, by "
            "--capevolve-finalize, never by an evaluation session"
        )
    if value not in EVALUABLE_SPLITS:
        raise pytest.UsageError(f"--capevolve-split must be train or val, got {value!r}")
    return value


def _null_count(value: str) -> int:
    try:
        count = int(value)
    except ValueError:
        count = -1
    if not 0 <= count <= 20:
        raise pytest.UsageError(f"--capevolve-null takes a whole number from 0 to 20, got {value!r}")
    return count


def _gate_request(config: pytest.Config, split: str) -> GateRequest:
    enabled = bool(config.option.capevolve_gate)
    if enabled and split != "val":
        raise pytest.UsageError(f"--capevolve-gate with --capevolve-split {split}: the gate reads only val")
    nulls = config.option.capevolve_null
    if nulls is None:
        nulls = 2 if enabled else 0
    return GateRequest(enabled, nulls, bool(config.option.capevolve_veto_regressions))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("capevolve", "capevolve: honest evaluation of agent capability changes")
    group.addoption(
        "--capevolve-run",
        metavar="PROJECT",
        help="evaluate the project's candidates: every rollout becomes a test item",
    )
    group.addoption(
        "--capevolve-candidate",
        action="append",
        default=[],
        metavar="DIR",
        help="candidate capability folder to evaluate (repeatable); default: the current best",
    )
    group.addoption(
        "--capevolve-tag",
        action="append",
        default=[],
        metavar="TAG",
        help="tag for the matching --capevolve-candidate (default: the folder's name)",
    )
    group.addoption(
        "--capevolve-split",
        type=_split_option,
        default=None,
        metavar="SPLIT",
        help="split to evaluate: train or val (default val; test is sealed)",
    )
    group.addoption(
        "--capevolve-rerun",
        action="store_true",
        help="evaluate again under fresh tags instead of reusing persisted rollouts",
    )
    group.addoption(
        "--capevolve-gate",
        action="store_true",
        help="gate each candidate against the current best on val and write verdicts",
    )
    group.addoption(
        "--capevolve-null",
        type=_null_count,
        default=None,
        metavar="N",
        help="null controls: N byte-identical copies of the best (default 2 when gating)",
    )
    group.addoption(
        "--capevolve-veto-regressions",
        action="store_true",
        help="veto an accept when a task the best passed drops by more than its own noise",
    )
    group.addoption(
        "--capevolve-finalize",
        metavar="PROJECT",
        help="score the current best (and the seed) on the sealed test split, once per run",
    )
    group.addoption("--capevolve-new-run", action="store_true", help="start a new run")
    group.addoption("--capevolve-run-id", metavar="ID", help="use this run instead of the newest")
    for key in INI_KEYS:
        parser.addini(f"capevolve_{key}", f"default for capevolve.yaml key {key}", default="")
    parser.addini("capevolve_split", "default split for --capevolve-run", default="val")


def _ini_defaults(config: pytest.Config) -> dict[str, str]:
    return {key: str(config.getini(f"capevolve_{key}")) for key in INI_KEYS}


def _candidate_requests(config: pytest.Config, spec: Spec) -> list[CandidateRequest]:
    dirs = [Path(d) for d in config.option.capevolve_candidate]
    tags = list(config.option.capevolve_tag)
    if tags and len(tags) != len(dirs):
        raise pytest.UsageError(
            f"--capevolve-tag given {len(tags)} times for {len(dirs)} --capevolve-candidate; "
            "give one tag per candidate, in the same order"
        )
    requests = []
    for i, folder in enumerate(dirs):
        path = folder.resolve()
        if not path.is_dir():
            raise pytest.UsageError(f"--capevolve-candidate {folder}: no such folder")
        tag = tags[i] if tags else path.name
        if path == spec.capability_path.resolve():
            tag = tags[i] if tags else SEED_TAG
        elif tag == SEED_TAG:
            raise pytest.UsageError(
                f"--capevolve-candidate {folder}: the tag 'seed' belongs to the spec's "
                "capability_path; give this candidate another --capevolve-tag"
            )
        requests.append(CandidateRequest(tag, path))
    return requests


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def _session_target(config: pytest.Config) -> tuple[str | None, bool]:
    """(project, is_finalize) for this session; the two session kinds exclude each other."""
    run, finalize = config.option.capevolve_run, config.option.capevolve_finalize
    if run and finalize:
        raise pytest.UsageError(
            "--capevolve-run and --capevolve-finalize are separate sessions; run one, then the other"
        )
    if finalize:
        for flag in (
            "capevolve_candidate",
            "capevolve_split",
            "capevolve_gate",
            "capevolve_rerun",
            "capevolve_new_run",
        ):
            if getattr(config.option, flag):
                raise pytest.UsageError(
                    f"--{flag.replace('_', '-')} does not apply to --capevolve-finalize: finalize "
                    "scores the run's current best, once, with the spec's trials"
                )
    return (finalize or run), bool(finalize)


def _controller(config: pytest.Config, spec: Spec, pool_ids: list[str], finalize: bool) -> Controller:
    if finalize:
        rundir = RunDir.resolve(spec.project_dir, config.option.capevolve_run_id, create=False)
        return FinalizeController(config, spec, rundir, pool_ids)
    split = config.option.capevolve_split or _split_option(config.getini("capevolve_split"))
    rundir = RunDir.resolve(spec.project_dir, config.option.capevolve_run_id, config.option.capevolve_new_run)
    return Controller(
        config,
        spec,
        rundir,
        pool_ids,
        _candidate_requests(config, spec),
        split,
        config.option.capevolve_rerun,
        _gate_request(config, split),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    target, finalize = _session_target(config)
    if not target:
        return
    workerinput = getattr(config, "workerinput", None)
    try:
        spec = load_spec(target, _ini_defaults(config))
        adapter = load_adapter(spec.adapter, spec.project_dir)
        pool = load_tasks(adapter, spec.adapter)
        if workerinput is not None:
            plan = EvalPlan.from_wire(json.loads(workerinput[WORKERINPUT_KEY]))
        else:
            controller = _controller(config, spec, sorted(pool), finalize)
            config.pluginmanager.register(controller, "capevolve-controller")
            plan = controller.plan
    except TestSealError as exc:
        raise pytest.UsageError(f"TestSealError: {exc}") from None
    except (SpecError, AdapterError, RunDirError, CandidateError, MicrocaseError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[CONTEXT_KEY] = EvalContext(spec, plan, AdapterRunner(adapter), pool)
    # A task the agent fails is data, not a bug: one line each (the scorer's feedback) and no
    # per-failure short summary, so the capevolve table stays readable. Explicit flags win.
    if config.option.tbstyle == "auto":
        config.option.tbstyle = "line"
    config.option.reportchars = (config.option.reportchars or "").replace("f", "").replace("a", "sxXE")
    # The spec is the only thing a capevolve session collects.
    config.args[:] = [str(spec.path)]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """An evaluation session collects only its spec; any other session collects microcases."""
    context = parent.config.stash.get(CONTEXT_KEY, None)
    if context is not None:
        return SpecFile.from_parent(parent, path=file_path) if file_path == context.spec.path else None
    if is_microcase_file(file_path):
        return MicrocaseFile.from_parent(parent, path=file_path)
    return None


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """Show an infra error as its own outcome ("I"/INFRA), never as a task failure."""
    if report.when == "call" and report.failed:
        record = record_from_report(report)
        if record is not None and record.get("infra_error"):
            return "infra", "I", ("INFRA", {"yellow": True})
    return None
