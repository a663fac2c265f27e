"""``dashboard.html``: a run drawn on one self-contained page (best so far, heatmap, verdicts'
forest plot, per-task drill-down).

:mod:`.model` reads the run dir once into numbers, :mod:`.plots` draws them as inline SVG,
:mod:`.page` puts the page together."""

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
    from .page import render_parts

    return "".join(render_parts(collect(rundir, num_trials, measurement, val)))


def write_dashboard(
    rundir: RunDir, num_trials: int, measurement: Measurement | None = None, val: ByTag | None = None
) -> Path:
    """Write ``dashboard.html`` (atomically, in pieces as it is drawn: :func:`build`'s bytes)."""
    from .model import collect
    from .page import render_parts

    return rundir.write_dashboard(render_parts(collect(rundir, num_trials, measurement, val)))
