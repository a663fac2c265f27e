"""The run's secret: the key the sequential gate's task orders are derived with, and what names the
folders candidates run from and the rollout files (:func:`namer`): no one can name either without it.

A swapped or deleted secret is refused (its SHA-256 is logged), and so is a run whose secret names
less than this version's does (an older version named its rollout files by tag). The optimizer can
read the run dir and grind byte variants until one's order puts its gains first, so each order also
takes a nonce drawn when a sequential gate first plans those bytes: no order exists before then."""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from ..._decide.task_order import commitment
from ..._project.way_on import pasteable
from ..files import RunDirError, atomic_write_text
from ..log.event_kinds import ORDER_NONCE_DRAWN, ORDER_SECRET_CREATED
from ..log.events import EventLog

SECRET_BYTES = 32
# what a run's secret names, logged with it: a run whose secret names less was made by an older version
NAMES = ["snapshots", "rollouts"]


def namer(secret: bytes, purpose: str) -> Callable[[str], str]:
    """Names for ``purpose`` (a snapshot folder, a rollout file): a MAC of the text under a key of the
    purpose's own, derived from the run's secret, 64 bits in hex. One key per purpose, so a name of one
    kind tells nothing of the other's."""
    key = hmac.digest(secret, f"capevolve-{purpose}".encode(), "sha256")
    return lambda text: hmac.digest(key, text.encode(), "sha256").hex()[:16]


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def new_nonce() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


class OrderSecretError(RunDirError):
    """The order secret does not match the run's record of it."""


class OrderSecret:
    """Controller only (planning and verdicts read it; workers get the orders in the plan)."""

    def __init__(self, root: Path, log: EventLog, project_dir: Path | None = None) -> None:
        self.path = root / "secret" / "order.key"
        self.log = log
        self.project_dir = project_dir  # to say the way on with the project's path

    def recorded(self) -> str | None:
        found = self.log.of_kinds(ORDER_SECRET_CREATED)
        if found and not set(NAMES) <= set(found[0].get("names") or ()):
            said = (
                f"run {self.path.parent.parent.name} was made by an older pytest-capevolve, which named its "
                "rollout files (rollouts/<split>/<task>__<tag>__t<k>.json), or the folders candidates ran "
                "from, by tag: candidate code could find a record, or its own tag, by name. Its layout is "
                "not read; start a new run (`pytest --capevolve-run PROJECT --capevolve-new-run`, or "
                "`capevolve hill-climb PROJECT --new-run`)"
            )
            raise OrderSecretError(pasteable(said, self.project_dir))
        return str(found[0]["sha256"]) if found else None

    def create(self) -> None:
        if self.recorded() is not None:
            return
        secret = new_secret()
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_text(self.path, secret.hex())
        os.chmod(self.path, 0o600)
        self.log.append_event(
            ORDER_SECRET_CREATED, sha256=commitment(secret), path="secret/order.key", names=NAMES
        )

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
