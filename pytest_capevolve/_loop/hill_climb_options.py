"""``capevolve hill-climb``'s flags: the options the CLI hands the loop, and their checks, made
before anything runs so a bad flag is a refusal (exit 2), not a failed iteration; and the stop
they set, checked before every iteration in this order: ``--max-iterations``, the spend report's
stop, one more iteration that does not fit, a plateau (``--convergence``), nothing left failing
on val."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._decide.alpha_budget import LOOP_SCHEDULE
from .._policy.budget.spend import spend_report
from .._project.spec import FOCUS_ALIASES, HILL_CLIMB_FOCUS, Spec
from .._project.yamlfile import YamlError, read_yaml
from .._store.rundir import RunDir
from ..exitcodes import Refusal
from .diagnose import diagnose
from .journal import proposals
from .prompt import DEFAULT_INSTRUCTIONS, convergence, focus_tasks

DEFAULT_OPTIMIZER_TIMEOUT = 1800.0
# The split whose failures the optimizer is shown: val (the default) or train, so edits are not
# fitted to the split that judges them (benchmarks/hill_climb.py measures both).
SIGNALS = ("val", "train")
# Flags that become `-o capevolve_<key>=...` for the gate session (the spec wins over them).
INI_FLAGS = {"n_trials": "num_trials", "gate_mode": "gate_mode", "k_se": "gate_k_se", "alpha": "gate_alpha"}


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
    no_regression: str | None = None  # noise|strict: veto an accept with regressions of that rule
    protected_paths: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    convergence: bool = False
    workers: int = 0
    store: str | None = None
    instructions_file: Path | None = None
    optimizer_timeout: float = DEFAULT_OPTIMIZER_TIMEOUT
    run_id: str | None = None
    new_run: bool = False  # start a new run of the project (its baseline first)
    signal: str = "val"  # the split whose failures the optimizer is shown (SIGNALS)
    writable: tuple[Path, ...] = ()  # folders outside the project the optimizer may also write
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))


def ini_overrides(options: Options, spec_path: Path, schedule: str = LOOP_SCHEDULE) -> dict[str, str]:
    """The flags passed to the gate session as ini defaults, refused where the spec sets the key
    to another value (the spec would win); ``schedule``: the loop's α schedule."""
    try:
        raw = read_yaml(spec_path) or {}
    except YamlError as exc:
        raise Refusal(str(exc)) from None
    out: dict[str, str] = {}
    for flag, key in INI_FLAGS.items():
        value = getattr(options, flag)
        if value is None:
            continue
        if isinstance(raw, dict) and key in raw and raw[key] != value:
            raise Refusal(
                f"--{flag.replace('_', '-')} {value}: the spec {spec_path} sets {key}: {raw[key]}, "
                "and the spec wins over what a flag can pass to the gate session; edit the spec instead"
            )
        out[key] = str(value)
    if not names_a_schedule(spec_path):
        out["gate_alpha_schedule"] = schedule
    return out


def names_a_schedule(spec_path: Path) -> bool:
    """Whether the spec names its α schedule; unless it does, a loop spends α across the run's decisions."""
    try:
        raw = read_yaml(spec_path) or {}
    except YamlError:
        return False
    return isinstance(raw, dict) and "gate_alpha_schedule" in raw


def checked_optimizer(options: Options, spec: Spec) -> str:
    """The optimizer command (the flag, else the spec's); refused when absent or when it never
    names ``{workdir}`` (it could not edit the candidate)."""
    optimizer = options.optimizer or spec.optimizer
    if not optimizer:
        raise Refusal(
            "no optimizer: give --optimizer 'CMD … {workdir} … {prompt}' (or the spec's `optimizer`)"
        )
    if "{workdir}" not in optimizer:
        raise Refusal(f"--optimizer {optimizer!r} never names {{workdir}}: it could not edit the candidate")
    return optimizer


def checked_focus(options: Options, spec: Spec) -> str:
    """The focus mode: the flag, else ``algorithm_focus``, else ``all`` (``all-at-once`` too)."""
    focus = options.focus or spec.algorithm_focus or "all"
    focus = FOCUS_ALIASES.get(focus, focus)
    if focus not in HILL_CLIMB_FOCUS:
        raise Refusal(f"--focus {focus!r}: use one of {', '.join(HILL_CLIMB_FOCUS)}")
    return focus


def check_limits(options: Options) -> None:
    """``--optimizer-timeout`` > 0, ``--max-iterations`` ≥ 0, ``--new-run`` alone."""
    if options.optimizer_timeout <= 0:
        raise Refusal(f"--optimizer-timeout {options.optimizer_timeout:g}: give a number of seconds > 0")
    if options.max_iterations is not None and options.max_iterations < 0:
        raise Refusal(f"--max-iterations {options.max_iterations}: give 0 or more")
    if options.new_run and (options.run_id is not None or options.resume):
        given = "--run-id" if options.run_id is not None else "--resume"
        raise Refusal(f"--new-run starts a new run; {given} continues an existing one: give one")


def check_signal(options: Options, train_ids: list[str]) -> None:
    """``--signal train`` needs a train split to show the optimizer."""
    if options.signal not in SIGNALS:
        raise Refusal(f"--signal {options.signal!r}: use one of {', '.join(SIGNALS)}")
    if options.signal == "train" and not train_ids:
        raise Refusal("--signal train: the run has no train split (split_train is 0); use --signal val")


def instructions_template(options: Options) -> str:
    """The prompt's template: ``--instructions-file``, else the built-in instructions."""
    if options.instructions_file is None:
        return DEFAULT_INSTRUCTIONS
    try:
        return options.instructions_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise Refusal(f"--instructions-file {options.instructions_file}: {exc}") from None


def stop_reason(spec: Spec, rundir: RunDir, options: Options, done: int, proposed: int) -> str | None:
    """Why the loop stops now, ``done`` iterations in (one line for the log and ``summary.json``),
    or None to go on; ``proposed``: the run's optimizer runs before this invocation."""
    if options.max_iterations is not None and done >= options.max_iterations:
        return max_iterations_reason(done, options.max_iterations)
    if failing := failing_optimizer(rundir, proposed):
        return failing
    report = spend_report(spec, rundir, n_siblings=1)
    if report["recommendation"]["action"] == "stop":
        reason = report["recommendation"]["reason"]
        return f"{'stall' if reason.startswith('stalled') else 'spend'}: {reason}"
    if report["afford"]["affordable"] is False:
        return "spend: one more iteration does not fit: " + "; ".join(
            b["message"] for b in report["afford"]["blockers"]
        )
    stall = int(rundir.state.read_state().get("stall", 0))
    if options.convergence and convergence(stall) == "stop":
        return f"convergence: stop (stall {stall}: a long plateau)"
    rows = diagnose(spec, rundir, rundir.state.best())["tasks"]
    if not focus_tasks(rows, "all", 1):
        return f"nothing fails on val: best {rundir.state.best()!r} passes every val task"
    return None


# a command that fails this many times in a row is broken, not unlucky: each try may cost the user
FAILED_IN_A_ROW = 3


def failing_optimizer(rundir: RunDir, before: int) -> str | None:
    """The stop when this invocation's last proposals all failed (a wrong ``--optimizer``), each booked an
    unchanged copy; None while it works or has not failed that often in a row. ``before``: the run's
    proposals when the invocation started (a fixed command run again goes on)."""
    last = [e.get("optimizer") for e in proposals(rundir)[before:][-FAILED_IN_A_ROW:]]  # ok, exited 1 (…)
    if len(last) < FAILED_IN_A_ROW or "ok" in last:
        return None
    return (
        f"optimizer: its last {FAILED_IN_A_ROW} runs failed, the last {last[-1]}; fix the --optimizer "
        "command (or the spec's `optimizer`) and run hill-climb again: it goes on in this run"
    )


def max_iterations_reason(done: int, max_iterations: int) -> str:
    """The stop at ``--max-iterations``, which counts the run's hill-climb iterations (a resumed
    or second invocation included), so a run can already hold more than it allows."""
    if done == max_iterations:
        return (
            f"max iterations: the run's {done} hill-climb iterations reach --max-iterations {max_iterations}"
        )
    return (
        f"max iterations: the run already holds {done} hill-climb iterations, more than --max-iterations "
        f"{max_iterations} allows (it counts the run's iterations, not this invocation's): none run"
    )
