"""The run's order secret: the key the sequential gate's task orders are derived with.

Made once, when the run is created (or, for a run older than this file, when its first
sequential gate is planned), as 32 random bytes in ``secret/order.key`` of the run dir — never
in ``candidates/``, ``work/`` or any snapshot, so a candidate's folder never holds it — and
its SHA-256 is appended to the event log (``order_secret_created``). Every read checks the file
against that commitment: a secret swapped, or deleted after orders were drawn from it (to draw
again), is refused in one line, never used.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .._decide.task_order import commitment
from .events import EventLog
from .files import RunDirError, atomic_write_text

EVENT = "order_secret_created"
SECRET_BYTES = 32


def new_secret() -> bytes:
    """Fresh random bytes from the OS (the one place a secret is made)."""
    return secrets.token_bytes(SECRET_BYTES)


class OrderSecretError(RunDirError):
    """The order secret does not match the run's record of it."""


class OrderSecret:
    """Controller only (planning and verdicts read it; workers get the orders in the plan)."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.path = root / "secret" / "order.key"
        self.log = log

    def recorded(self) -> str | None:
        """The commitment the event log holds, if any."""
        found = [e for e in self.log.events() if e.get("kind") == EVENT]
        return str(found[0]["sha256"]) if found else None

    def create(self) -> None:
        """Make the secret and commit to it (run creation; a no-op when it exists)."""
        if self.recorded() is not None:
            return
        secret = new_secret()
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        atomic_write_text(self.path, secret.hex())
        os.chmod(self.path, 0o600)
        self.log.append_event(EVENT, sha256=commitment(secret), path="secret/order.key")

    def read(self) -> bytes:
        """The secret, checked against the log's commitment (made now if the run has none)."""
        if self.recorded() is None:
            self.create()
        expected = str(self.recorded())
        try:
            secret = bytes.fromhex(self.path.read_text(encoding="ascii").strip())
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise OrderSecretError(
                f"{self.path}: the run's order secret is missing or damaged ({type(exc).__name__}); the "
                "sequential gate's orders cannot be derived again. Start a new run (--capevolve-new-run)"
            ) from None
        if commitment(secret) != expected:
            raise OrderSecretError(
                f"{self.path}: the run's order secret does not match the SHA-256 its event log "
                f"committed to ({expected[:12]}…); it was replaced. Restore it, or start a new run "
                "(--capevolve-new-run)"
            )
        return secret
