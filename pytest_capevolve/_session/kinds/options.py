"""The options the session kinds read, each read and checked in one place.

Controller only, before anything is paid: a contradiction is a ``pytest.UsageError``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..._project.candidate import SEED_TAG
from ..._project.way_on import no_such_candidate
from .base import SCHEDULE_WHY

if TYPE_CHECKING:
    from ..._project.spec import Spec
    from ..planning import CandidateRequest, GateRequest

COMMIT_MODES = ("auto", "none")


def commit_mode(config: pytest.Config) -> str:
    """``--capevolve-commit`` (else the ini's, else ``auto``): book the decisions, or only write them."""
    commit = str(config.option.capevolve_commit or config.getini("capevolve_commit") or "auto")
    if commit not in COMMIT_MODES:
        raise pytest.UsageError(
            f"--capevolve-commit must be one of {', '.join(COMMIT_MODES)}, got {commit!r}"
        )
    return commit


def cheaper_evidence(config: pytest.Config, split: str) -> str | None:
    option = config.option
    screen = option.capevolve_screen is not None
    if not screen and not option.capevolve_grow:
        return None
    kind = "grow" if option.capevolve_grow else "screen"
    flag = f"--capevolve-{kind}"
    if screen and option.capevolve_grow:
        raise pytest.UsageError("--capevolve-screen and --capevolve-grow are separate sessions; run one")
    if len(option.capevolve_candidate) != 1:
        raise pytest.UsageError(f"{flag} takes exactly one --capevolve-candidate")
    for name in ("gate", "rerun", "block"):
        if getattr(option, f"capevolve_{name}"):
            raise pytest.UsageError(f"--capevolve-{name} does not apply to {flag}")
    if split != "val":
        raise pytest.UsageError(f"{flag} with --capevolve-split {split}: screens and grows read only val")
    return kind


def refuse_pairwise(spec: Spec, flag: str) -> None:
    """``gate_mode: pairwise`` is decided by a plain gate session; a kind deciding on rewards alone would
    use another rule than the run's."""
    if spec.gate_mode == "pairwise":
        raise pytest.UsageError(
            f"{flag} decides on rewards, and this run's gate_mode is pairwise (a judge's preferences, "
            "judged by a gate session): gate with --capevolve-gate alone, or start a new run with "
            "another gate_mode"
        )


def gate_request(config: pytest.Config, split: str, spec: Spec) -> GateRequest:
    from ..._decide.rounds import MULTIPLE
    from ..planning import GateRequest

    option = config.option
    enabled = bool(option.capevolve_gate)
    if enabled and split != "val":
        raise pytest.UsageError(f"--capevolve-gate with --capevolve-split {split}: the gate reads only val")
    if enabled and option.capevolve_block:
        raise pytest.UsageError(
            f"--capevolve-gate with --capevolve-block {option.capevolve_block}: the gate reads block 0 only; "
            "a replicate block is evidence for `capevolve multirep`, evaluated without --capevolve-gate"
        )
    nulls = (2 if enabled else 0) if option.capevolve_null is None else option.capevolve_null
    commit = commit_mode(config)
    multiple = option.capevolve_multiple or config.getini("capevolve_multiple") or "holm"
    if multiple not in MULTIPLE:
        raise pytest.UsageError(
            f"--capevolve-multiple must be one of {', '.join(MULTIPLE)}, got {multiple!r}"
        )
    sequential = bool(option.capevolve_sequential)
    if sequential and not enabled:
        raise pytest.UsageError("--capevolve-sequential decides a gate: add --capevolve-gate")
    dist = config.getoption("dist", "no")
    if sequential and dist not in ("no", "load"):
        # only the load scheduler is replaced by the sequential window; under another
        # scheduler the workers run ahead of the decision and the stop saves nothing
        raise pytest.UsageError(
            f"--capevolve-sequential with --dist {dist}: the early stop needs --dist load (what -n uses)"
        )
    from ..._policy.alpha.gate_settings import overridden

    overrides = tuple(sorted(overridden(getattr(option, "override_ini", None), spec).items()))
    harness_changed = bool(getattr(option, "capevolve_harness_changed", False))
    if harness_changed and not enabled:
        raise pytest.UsageError("--capevolve-harness-changed re-gates decided bytes: add --capevolve-gate")
    if harness_changed and sequential:  # the sequential gate writes its verdicts on its own path
        raise pytest.UsageError(
            "--capevolve-harness-changed with --capevolve-sequential: re-gate after a harness change "
            "with the fixed-n gate, whose verdicts carry the label"
        )
    return GateRequest(
        enabled,
        nulls,
        bool(option.capevolve_veto_regressions),
        commit,
        multiple,
        sequential,
        overridden=overrides,
        harness_changed=harness_changed,
        regression_rule=option.capevolve_regression_rule,
        schedule_why=config.stash.get(SCHEDULE_WHY, None),
    )


def candidate_requests(config: pytest.Config, spec: Spec) -> list[CandidateRequest]:
    dirs = [Path(d) for d in config.option.capevolve_candidate]
    tags = list(config.option.capevolve_tag)
    if tags and len(tags) != len(dirs):
        raise pytest.UsageError(
            f"--capevolve-tag given {len(tags)} times for {len(dirs)} --capevolve-candidate; "
            "give one tag per candidate, in the same order"
        )
    from ..planning import CandidateRequest

    requests = []
    for i, folder in enumerate(dirs):
        path = folder.resolve()
        if not path.is_dir():
            raise pytest.UsageError(no_such_candidate(folder))
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
