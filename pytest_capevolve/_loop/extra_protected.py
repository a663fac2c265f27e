"""``capevolve hill-climb --protected-paths``: globs the loop checks itself, beside the spec's; a
work copy that changes one is made indecisive (basis ``tamper``) before its gate pays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._project.candidate import CandidateError
from .._project.harness import protected_digests, tampered
from .._project.spec import Spec
from .._store.rundir import RunDir


def refuse_extra_tamper(
    spec: Spec, rundir: RunDir, cid: str, parent: str, workdir: Path, extra_protected: tuple[str, ...]
) -> bool:
    """True (and the tamper verdict written) when ``workdir`` changes the seed's ``extra_protected`` paths."""
    from .._policy import guards

    try:
        digests = protected_digests(spec.capability_path, extra_protected)
        changes = tampered(digests, workdir, extra_protected)
    except CandidateError as exc:
        changes = [str(exc)]
    if not changes:
        return False
    details: dict[str, Any] = {
        "changed_paths": changes,
        "protected_paths": list(extra_protected),
        "source": str(workdir),
    }
    reason = f"never scored: it changes a path --protected-paths protects ({'; '.join(changes[:5])})"
    guards.record_refusal(
        spec, rundir, guards.TAMPER, cid, parent, decision="indecisive", reason=reason, details=details
    )
    return True
