"""The run's secret: the key the sequential gate's task orders are derived with, and the folders
candidates run from are named with (:func:`.._store.snapshots.folder_name`).

A swapped or deleted secret is refused (its SHA-256 is logged). The optimizer can read the run dir
and grind byte variants until one's order puts its gains first, so each order also takes a nonce
drawn when a sequential gate first plans those bytes: no order exists before then."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ..._decide.task_order import commitment
from ..files import RunDirError, atomic_write_text
from ..log.event_kinds import ORDER_NONCE_DRAWN, ORDER_SECRET_CREATED
from ..log.events import EventLog

SECRET_BYTES = 32


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def new_nonce() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


class OrderSecretError(RunDirError):
    """The order secret does not match the run's record of it."""


class OrderSecret:
    """Controller only (planning and verdicts read it; workers get the orders in the plan)."""

    def __init__(self, root: Path, log: EventLog) -> None:
        self.path = root / "secret" / "order.key"
        self.log = log

    def recorded(self) -> str | None:
        found = self.log.of_kinds(ORDER_SECRET_CREATED)
        return str(found[0]["sha256"]) if found else None

    def create(self) -> None:
        if self.recorded() is not None:
            return
        secret = new_secret()
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_text(self.path, secret.hex())
        os.chmod(self.path, 0o600)
        self.log.append_event(ORDER_SECRET_CREATED, sha256=commitment(secret), path="secret/order.key")

    def read(self) -> bytes:
        self.create()  # (once: a recorded secret is kept)
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

    def nonces(self, content_hashes: list[str]) -> dict[str, str]:
        """content hash → the nonce its order is drawn with (drawn and logged now for new bytes)."""
        drawn = self._logged_nonces()
        missing = [h for h in dict.fromkeys(content_hashes) if h not in drawn]
        for content_hash in missing:
            self.log.append_event(ORDER_NONCE_DRAWN, content_hash=content_hash, nonce=new_nonce().hex())
        if missing:
            drawn = self._logged_nonces()  # another session's nonce, appended first, wins
        return {h: drawn[h] for h in content_hashes}

    def logged_nonce(self, content_hash: str | None) -> str | None:
        return self._logged_nonces().get(content_hash) if content_hash else None

    def _logged_nonces(self) -> dict[str, str]:
        drawn: dict[str, str] = {}
        for event in self.log.of_kinds(ORDER_NONCE_DRAWN):
            content_hash, nonce = event.get("content_hash"), event.get("nonce")
            if isinstance(content_hash, str) and isinstance(nonce, str):
                drawn.setdefault(content_hash, nonce)
        return drawn
