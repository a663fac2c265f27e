"""A loop's repeats: an optimizer output whose bytes the run already holds is booked unpaid.

A candidate is its bytes (:mod:`.._policy.repeats.identity`), so a work copy identical to an earlier
candidate (a failed optimizer's copy of the parent included) gets a ``reject`` verdict with
basis ``repeat``, naming what it repeats, booked like any verdict. Pays nothing."""

from __future__ import annotations

from pathlib import Path

from .._policy.repeats.identity import earlier_with_bytes, repeat_line
from .._project.candidate import CandidateError, content_hash
from .._project.spec import Spec
from .._store.rundir import RunDir


def refuse_repeat_unpaid(spec: Spec, rundir: RunDir, cid: str, parent: str, workdir: Path) -> bool:
    """True (and the repeat's verdict written) when ``workdir`` holds bytes the run already holds."""
    from .._policy import guards

    try:
        digest = content_hash(workdir)
    except CandidateError:  # what cannot be hashed (a FIFO, a loop): the session's tamper screen
        return False
    earlier = earlier_with_bytes(rundir, digest, besides=cid)
    if earlier is None:
        return False
    best = rundir.state.best()
    line = repeat_line(cid, digest, earlier, best=best)
    if earlier.decision == "accept" and earlier.tag != best:  # booked here, unlike a gate's repeat
        line = (
            f"candidate {cid!r} is byte-identical to {earlier.tag!r} ({earlier.accepted_at()}) in "
            f"{earlier.where()}: that accept stands, and this proposal, which brings nothing new, "
            "is booked reject (repeat)"
        )
    guards.record_refusal(
        spec,
        rundir,
        guards.REPEAT,
        cid,
        parent,
        decision="reject",
        reason=f"never paid for: {line}",
        details={
            "repeats": earlier.tag,
            "content_hash": digest,
            "earlier_decision": earlier.decision,
            "earlier_level": earlier.level,
        },
    )
    return True
