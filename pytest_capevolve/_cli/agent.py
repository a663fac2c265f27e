"""``capevolve agent -- CMD ARGS…`` (a coding agent inside the optimizer's boundary, its broker
outside) and ``capevolve pytest ARGS…`` (a pytest session, through the broker inside an agent).

Inside an agent, :func:`forwarded` sends every command but :data:`LOCAL` to the broker
(:mod:`.broker_policy`); outside, ``capevolve pytest`` is ``python -m pytest``, so the playbooks'
commands work in both places."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import exitcodes
from .common import UsageError, spec_of

LOCAL = ("skills", "init", "import-cap-evolve", "compare")  # they read no run: they run where asked
USAGE = "capevolve agent [--writable PATH] -- CMD ARGS…"
NO_BROKER = (
    "this runs inside a hill-climb optimizer's boundary, where the run dir cannot be read and no broker "
    "runs commands; what the loop gives the optimizer is its round's prompt ({prompt}: the parent's "
    "failures, the ids to protect) and the work copy's handover files (JOURNAL.md, LEDGER.md, "
    "rejected.jsonl, prior_iterations/): edit the work copy and exit, and the loop gates it"
)


def forwarded(words: Sequence[str]) -> int | None:
    """Inside an agent: ``words`` run by the broker, and its exit code; None where not."""
    from .._confine.broker_wire import BrokerGone, BrokerNotInherited, broker_fd, forward

    fd = broker_fd()
    if not words or words[0] in LOCAL or words[0].startswith("-"):
        return None
    if fd is None:
        from .._engine.confinement import inside_boundary

        if not inside_boundary():
            return None  # outside any boundary, or unconfined: the run dir is readable here
        problem = NO_BROKER  # a hill-climb's optimizer: "no run yet" would send it to evaluate one
    elif words[0] == "agent":
        problem = (
            "this is already inside an agent's boundary; run the command itself (its capevolve "
            "commands reach the broker as they are)"
        )
    else:
        try:
            return forward(fd, list(words), os.getcwd())
        except BrokerNotInherited as exc:
            problem = str(exc)
        except BrokerGone as exc:
            problem = f"the broker of capevolve agent is gone ({exc}); start the agent again: {USAGE}"
    print(f"error: capevolve {words[0]}: {problem}", file=sys.stderr)
    return exitcodes.USAGE


def run_pytest(args: Sequence[str]) -> int:
    """``capevolve pytest ARGS`` outside an agent: pytest, here, with these arguments."""
    return subprocess.run([sys.executable, "-P", "-m", "pytest", *args], check=False).returncode


def cmd_agent(args: argparse.Namespace) -> int:
    """Start the agent's command inside the boundary and serve its capevolve commands."""
    from .._loop.agent_session import run_agent
    from .._loop.optimizer import checked_writable
    from .broker_policy import AgentPolicy

    spec = spec_of(args)
    if spec.project_dir.resolve() != Path.cwd().resolve():
        raise UsageError(f"start the agent from the project folder: cd {spec.project_dir} && {USAGE}")
    extra = checked_writable(spec, args.writable or ())
    return run_agent(
        spec,
        list(args.agent_argv),
        policy_for=lambda run, writable: AgentPolicy(spec, writable, run.run_id),
        also_writable=extra,
    )


def register(sub: Any) -> None:
    """``agent`` and ``pytest`` on the ``capevolve`` parser."""
    agent = sub.add_parser(
        "agent",
        help="run a coding agent inside the optimizer's boundary, its capevolve commands run by a broker",
        usage=USAGE,
    )
    agent.add_argument(
        "--writable",
        action="append",
        type=Path,
        metavar="PATH",
        help="a folder or file outside the project the agent may also write (its own state); repeatable",
    )
    agent.add_argument("agent_argv", nargs="*", metavar="CMD", help="the agent's command, after --")
    agent.set_defaults(func=cmd_agent)
    session = sub.add_parser(
        "pytest",
        help="a pytest session (gate, screen, finalize, microcases): through the broker inside an agent",
        add_help=False,
    )
    session.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="ARGS")
    # main() runs `capevolve pytest` unparsed: this is for --help
    session.set_defaults(func=lambda args: run_pytest(args.pytest_args))
