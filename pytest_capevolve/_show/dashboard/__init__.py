"""``dashboard.html``: a run drawn on one self-contained page (best so far, heatmap, verdicts'
forest plot, spend, lineage, per-task drill-down).

:mod:`.model` reads the run dir once into numbers, :mod:`.plots` draws them as inline SVG
(:mod:`.svg` holds the pieces), :mod:`.page` puts the page together, :mod:`.command` is
``capevolve dashboard``. Written beside ``report.md`` at the end of every session
(:mod:`..persistence` hands over what it has already read) and rebuilt by the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a page is drawn: ``capevolve --help`` must not load numpy
    from ..._store.readers.evidence import ByTag
    from ..._store.rundir import RunDir
    from ..measure import Measurement

__all__ = ["build", "write_dashboard"]


def build(
    rundir: RunDir, num_trials: int, measurement: Measurement | None = None, val: ByTag | None = None
) -> str:
    """The page for this run, as HTML text."""
    from .model import collect
    from .page import render

    return render(collect(rundir, num_trials, measurement, val))


def write_dashboard(
    rundir: RunDir, num_trials: int, measurement: Measurement | None = None, val: ByTag | None = None
) -> Path:
    """Write ``dashboard.html`` in the run dir (atomically) and return its path. The page goes
    to its file in pieces as it is drawn (the same bytes as :func:`build`'s)."""
    from .model import collect
    from .page import render_parts

    return rundir.write_dashboard(render_parts(collect(rundir, num_trials, measurement, val)))
