"""The order a sequential gate sees val in: fixed only once the candidate's bytes are.

An order computable in advance can be played: a candidate better on some tasks and worse on
others crosses the efficacy threshold ≤ 1.3 % of the time when the order is unrelated to where
it gains, and 92.5–100 % of the time when its gains come first. So the order is keyed by the
run's secret (:mod:`.._store.order_secret`: made at run start, kept in the run dir, never in a
candidate folder or snapshot, its SHA-256 committed to the event log), a nonce drawn when a
sequential gate first plans the bytes (so no order exists to compute before the bytes are
frozen, even for a reader of the secret), and the candidate's content hash: an HMAC-SHA256 of
each task id under a key derived from all three, tasks sorted by it.
The same bytes in the same run always get the same order (resume, workers, ``capevolve gate``),
other bytes or another run an unrelated one, and the verdict records the order it was decided in.

Pure: bytes and strings in, a list out.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence

DERIVATION = "hmac-sha256(hmac-sha256(secret + nonce, 'capevolve-sequential-order:' + content_hash), task_id)"


def commitment(secret: bytes) -> str:
    """What the event log records of the secret: its SHA-256, so a swapped secret is caught."""
    return hashlib.sha256(secret).hexdigest()


def task_order(task_ids: Iterable[str], secret: bytes, content_hash: str, nonce: bytes = b"") -> list[str]:
    """The tasks in the order a candidate with these bytes is gated in, in this run (``nonce``:
    the one drawn when a sequential gate first planned these bytes)."""
    key = hmac.new(
        secret + nonce, f"capevolve-sequential-order:{content_hash}".encode(), hashlib.sha256
    ).digest()
    return sorted(task_ids, key=lambda t: (hmac.new(key, t.encode(), hashlib.sha256).digest(), t))


def interleaved(orders: Iterable[Sequence[str]]) -> list[str]:
    """One item order serving several tags' orders: position by position across the orders,
    each task at its first appearance, so every tag's prefix completes about as fast as alone."""
    lists = [list(o) for o in orders]
    seen: dict[str, None] = {}
    for i in range(max((len(o) for o in lists), default=0)):
        for order in lists:
            if i < len(order):
                seen.setdefault(order[i], None)
    return list(seen)
