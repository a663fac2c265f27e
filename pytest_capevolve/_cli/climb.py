"""``capevolve hill-climb``: the optimize loop that runs by itself (optimizer → guards → val gate
→ commit, repeated), driven by :class:`.._loop.hill_climb.HillClimb`. Exit 3 when an
evaluation did not complete (``--resume`` continues it).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from .. import exitcodes
from .common import Refusal, emit, project_of, said_as, spec_of
from .decisions import loop_arguments


def cmd_hill_climb(args: argparse.Namespace) -> int:
    """Run the loop on the project; print its summary (JSON, or ``--table``)."""
    from .._loop.hill_climb import HillClimb, Options
    from .._loop.hill_climb_record import LoopIncomplete
    from .._loop.loop_lock import only_loop
    from .._project.spec import SpecError

    project = project_of(args)
    spec_of(args)  # outside a project, say so before the loop starts
    flags = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(Options) if f.name not in ("project", "log")
    }
    flags.update(
        protected_paths=tuple(args.protected_paths or ()),
        capabilities=tuple(c for c in (args.capabilities or "").split(",") if c.strip()),
        writable=tuple(args.writable or ()),
    )
    options = Options(project=project, **flags)
    with said_as(Refusal, SpecError):
        loop = HillClimb(options)
    try:
        with only_loop(loop.spec.project_dir):
            summary = loop.run()
    except LoopIncomplete as exc:
        print(f"capevolve hill-climb: incomplete: {exc}", file=sys.stderr)
        return exitcodes.LOOP_INCOMPLETE
    return emit(args, summary, summary_lines, json_default=True)


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The ``--table`` form of a loop's summary: one line per iteration, the best, why it stopped."""
    lines = [f"capevolve hill-climb — run {summary['run_id']}"]
    for row in summary["iterations"]:
        numbers = ""
        if row["delta_mean"] is not None:
            numbers += f"  Δ̄ {round(row['delta_mean'], 4) + 0.0:+.4f}"  # never "-0.0000"
        if row["p_value"] is not None:
            numbers += f"  p {row['p_value']:.4g}"
        lines.append(f"{row['tag']}  {row['decision']:<11}{row['basis'] or '':<16}{numbers}")
    lines.append(f"best {summary['best']!r}; accepted: {', '.join(summary['accepted']) or 'none'}")
    lines.append(f"stopped: {summary['stopped']}")
    return lines


def register(sub: Any) -> None:
    """``hill-climb`` on the ``capevolve`` parser."""
    from pathlib import Path

    from .._decide.gate import GATE_MODES
    from .._loop.git_store import STORES
    from .._loop.prompt import FOCUS_MODES
    from .._project.spec import FOCUS_ALIASES

    hc = sub.add_parser("hill-climb", help="the optimize loop: optimizer → guards → val gate → commit")
    loop_arguments(hc)
    hc.add_argument("--optimizer", metavar="CMD", help="'CMD … {workdir} … {prompt}'")
    focus = (*FOCUS_MODES, *FOCUS_ALIASES)  # cap-evolve's `all-at-once` is `all`
    hc.add_argument("--focus", choices=focus, help="which failing val tasks to aim at")
    hc.add_argument(
        "--signal",
        choices=("val", "train"),
        default="val",
        help="whose failures the optimizer sees: val (the gate's split) or train (paid once per new best)",
    )
    hc.add_argument("--max-iterations", type=int, metavar="N", help="iterations in the run")
    hc.add_argument("--n-trials", type=int, metavar="K", help="trials (if the spec sets none)")
    hc.add_argument("--resume", action="store_true", help="finish an iteration a kill cut off")
    hc.add_argument("--new-run", action="store_true", help="start a new run (baseline first)")
    hc.add_argument("--gate-mode", choices=GATE_MODES)
    hc.add_argument("--k-se", type=float)
    hc.add_argument("--alpha", type=float)
    hc.add_argument(
        "--no-regression",
        nargs="?",
        const="noise",
        choices=("noise", "strict"),
        help="veto an accept that breaks a task: noise (the default when given), a drop beyond its "
        "own noise on a task the parent passed; strict, any val task the parent scored higher on",
    )
    hc.add_argument("--protected-paths", nargs="+", metavar="GLOB", help="also protect these")
    hc.add_argument("--capabilities", metavar="A,B", help="the allowed edit surface")
    hc.add_argument("--convergence", action="store_true", help="stop on a long plateau (stall ≥ 5)")
    hc.add_argument("-n", "--workers", type=int, default=0, help="xdist workers for each gate session")
    hc.add_argument("--store", choices=STORES, help="where every candidate is committed")
    hc.add_argument("--store-commit-cmd", metavar="CMD", help="'CMD {msg} {dir} {tag}'")
    hc.add_argument("--instructions-file", type=Path, metavar="F", help="the prompt template")
    hc.add_argument("--optimizer-timeout", type=float, default=1800.0, metavar="S", help="seconds (1800)")
    hc.add_argument(
        "--writable",
        action="append",
        type=Path,
        metavar="PATH",
        help="a folder or file outside the project the optimizer may also write (its own state); repeatable",
    )
    hc.set_defaults(func=cmd_hill_climb, refusals=True)
