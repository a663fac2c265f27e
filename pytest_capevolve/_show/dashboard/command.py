"""``capevolve dashboard [PROJECT] [--run-id R] [--open] [--json]``: rebuild ``dashboard.html``.

Reads the run (pays nothing, never opens the seal) and writes the page every session writes at
its end, so a run dir copied from CI, or one older than the dashboard, can be looked at.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_command(sub: Any) -> None:
    """Register the subcommand on the ``capevolve`` parser's subparsers."""
    parser = sub.add_parser(
        "dashboard", help="rebuild the run's self-contained dashboard.html (pays nothing)"
    )
    parser.add_argument("project", type=Path, nargs="?", default=Path("."), help="project folder (default .)")
    parser.add_argument("--run-id", default=None, help="the run to draw (default: the newest)")
    parser.add_argument("--open", action="store_true", help="open the page in a web browser")
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")
    parser.set_defaults(func=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from ..._project.spec import SpecError, load_spec
    from ..._store.rundir import RunDir, RunDirError
    from ..measure import measure
    from . import write_dashboard

    try:
        spec = load_spec(args.project)
        rundir = RunDir.resolve(spec.project_dir, args.run_id, create=False)
        path = write_dashboard(rundir, spec.num_trials, measure(spec, rundir))
    except (SpecError, RunDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    except (OSError, ValueError) as exc:  # a damaged file the run dir's reader does not repair
        print(f"error: could not draw the run: {exc}", file=sys.stderr)
        return 4
    for notice in rundir.notices:
        print(f"warning: {notice}", file=sys.stderr)
    if args.json:
        print(json.dumps({"dashboard": str(path), "run_id": rundir.run_id}, sort_keys=True))
    else:
        print(f"dashboard: {path}")
    if args.open:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            print(f"no web browser found: open {path} yourself", file=sys.stderr)
    return 0
