"""A hill-climb round whose own proposer used up ``max_usd``: refused before its gate pays.

The optimizer's cost is known only once it exits. When it leaves no room for the round's val
evaluation under ``max_usd`` (``capevolve spend``'s arithmetic), the round is not gated: an
``indecisive`` verdict with basis ``budget`` is booked with the optimizer's cost, and the loop
stops on the spend report. Pays nothing."""

from __future__ import annotations

from .._policy.optimizer_spend import unbooked_usd
from .._policy.spend import spend_report
from .._project.spec import Spec
from .._store.rundir import RunDir


def refuse_over_budget(spec: Spec, rundir: RunDir, cid: str, parent: str) -> str | None:
    """The reason (verdict written) when ``cid``'s proposer left its gate no room, else None."""
    from .._policy import guards

    proposer = unbooked_usd(rundir)
    if proposer <= 0:  # nothing spent since the check before the round
        return None
    report = spend_report(spec, rundir, n_siblings=1)
    money = [b["message"] for b in report["afford"]["blockers"] if b["ceiling"] == "max_usd"]
    if report["ceilings"]["max_usd"]["reached"]:
        money.insert(0, f"${report['spent']['total_usd']:.4f} spent reaches max_usd={spec.max_usd:g}")
    if not money:
        return None
    reason = (
        f"never gated: its optimizer reported ${proposer:.4f}, which leaves no room for its val "
        f"evaluation under max_usd ({'; '.join(money)}); the cost is booked, no rollout paid"
    )
    details = {"optimizer_usd": proposer, "blockers": money}
    verdict = guards.record_refusal(
        spec,
        rundir,
        guards.BUDGET,
        guards.Checkpoint.HILL_CLIMB,
        tag=cid,
        against=parent,
        decision="indecisive",
        reason=reason,
        details=details,
    )
    return verdict.reason
