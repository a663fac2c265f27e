"""When ``capevolve hill-climb`` stops, checked before every iteration in this order:
``--max-iterations``, the spend report's stop, one more iteration that does not fit, a plateau
(``--convergence``), nothing left failing on val."""

from __future__ import annotations

from .._policy.budget.spend import spend_report
from .._project.spec import Spec
from .._store.rundir import RunDir
from .diagnose import diagnose
from .prompt import convergence, focus_tasks


def stop_reason(
    spec: Spec, rundir: RunDir, *, done: int, max_iterations: int | None, watch_convergence: bool
) -> str | None:
    """Why the loop stops now (one line for the log and ``summary.json``), or None to go on."""
    if max_iterations is not None and done >= max_iterations:
        return max_iterations_reason(done, max_iterations)
    report = spend_report(spec, rundir, n_siblings=1)
    if report["recommendation"]["action"] == "stop":
        reason = report["recommendation"]["reason"]
        return f"{'stall' if reason.startswith('stalled') else 'spend'}: {reason}"
    if report["afford"]["affordable"] is False:
        return "spend: one more iteration does not fit: " + "; ".join(
            b["message"] for b in report["afford"]["blockers"]
        )
    stall = int(rundir.state.read_state().get("stall", 0))
    if watch_convergence and convergence(stall) == "stop":
        return f"convergence: stop (stall {stall}: a long plateau)"
    rows = diagnose(spec, rundir, rundir.state.best())["tasks"]
    if not focus_tasks(rows, "all", 1):
        return f"nothing fails on val: best {rundir.state.best()!r} passes every val task"
    return None


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
