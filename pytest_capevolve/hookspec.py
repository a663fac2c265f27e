"""Hooks a project can implement (in a ``conftest.py`` or a plugin) to extend capevolve.

Loaded with ``pytest_addhooks``. Every hook runs on the controller only (the process without
xdist, or xdist's controller), never on a worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._session.kinds import SessionKind


def pytest_capevolve_test_scored(result: dict[str, Any], run_dir: Path) -> None:
    """The test split has just been scored by a finalize session; the seal burns next.

    ``result`` is what ``seal.json`` will hold. Use it to publish the held-out number.
    Raising here aborts the burn: the seal stays unburned, and the next finalize reuses the
    persisted rollouts, so it reproduces this very score rather than drawing a new one::

        def pytest_capevolve_test_scored(result, run_dir):
            print("held-out mean:", result["best"]["mean"])
    """


@pytest.hookspec(firstresult=True)
def pytest_capevolve_make_session(
    config: pytest.Config, default: SessionKind, kinds: dict[str, SessionKind]
) -> SessionKind | None:
    """Return the kind of session to run instead of ``default``, or None to keep it.

    Called once, in ``pytest_configure``, before anything is planned or paid (as pytest-xdist
    calls ``pytest_xdist_make_scheduler``). ``kinds`` is capevolve's table (``"evaluate"``,
    ``"finalize"``, ``"screen"``, ``"grow"``, ``"sequential"`` → kind). A kind has a ``name``,
    ``asked(config, split)`` and ``start(config, spec, pool_ids, split)``, which plans the session
    and returns a ``Started`` (:mod:`pytest_capevolve._session.kinds.base`). Wrapping the default
    is the usual use::

        class Logged:
            def __init__(self, kind):
                self.kind, self.name, self.asked = kind, kind.name, kind.asked

            def start(self, config, spec, pool_ids, split):
                print("capevolve session:", self.name)
                return self.kind.start(config, spec, pool_ids, split)

        def pytest_capevolve_make_session(config, default, kinds):
            return Logged(default)
    """


def pytest_capevolve_verdict_written(config: pytest.Config, verdict: dict[str, Any], path: Path) -> None:
    """A session has just written a verdict file (a gate's candidate or null control, a grow's
    look, a refusal before paying, a sequential gate's decision or its "undecided" after Ctrl-C).

    ``verdict`` is what the file at ``path`` (under the run's ``verdicts/``) holds. The file is
    on disk when this is called; a hook that raises fails the session after the write::

        def pytest_capevolve_verdict_written(config, verdict, path):
            print(f"{verdict['tag']}: {verdict['decision']} ({path.name})")
    """


def pytest_capevolve_decision_booked(config: pytest.Config, decision: dict[str, Any]) -> None:
    """A ``--capevolve-commit auto`` session (gate, sequential gate, screen, grow) has just
    booked a decision in the run's record, as ``capevolve commit`` would.

    ``decision`` is the decision as logged (``tag``, ``decision``, ``basis``, …). A decision
    the record refused (a tag is decided once) is not booked and calls nothing::

        def pytest_capevolve_decision_booked(config, decision):
            if decision["decision"] == "accept":
                notify(f"accepted {decision['tag']}")
    """
