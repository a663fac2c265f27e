"""The order a sequential gate sees val in: fixed only once the candidate's bytes are.

An order known in advance can be played (gains first), so each task id is ranked by an HMAC-SHA256 keyed
by the run's secret (:mod:`.._store.sessions.order_secret`), a nonce drawn at first plan, and the content
hash: the same bytes in the same run always get the same order. Pure."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence

DERIVATION = "hmac-sha256(hmac-sha256(secret + nonce, 'capevolve-sequential-order:' + content_hash), task_id)"
# a null control's (and the best's) order: the session's, made of the candidates' orders
INTERLEAVED = "interleaved(the candidates' orders): position by position, each task at its first appearance"


def commitment(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()


def task_order(task_ids: Iterable[str], secret: bytes, content_hash: str, nonce: bytes = b"") -> list[str]:
    """The tasks in the order these bytes are gated in, in this run (``nonce``: drawn at first plan)."""
    key = hmac.new(
        secret + nonce, f"capevolve-sequential-order:{content_hash}".encode(), hashlib.sha256
    ).digest()
    return sorted(task_ids, key=lambda t: (hmac.new(key, t.encode(), hashlib.sha256).digest(), t))


def interleaved(orders: Iterable[Sequence[str]]) -> list[str]:
    """One item order for several tags' orders, position by position, each task at its first appearance, so
    every tag's prefix completes about as fast as alone."""
    lists = [list(o) for o in orders]
    seen: dict[str, None] = {}
    for i in range(max((len(o) for o in lists), default=0)):
        for order in lists:
            if i < len(order):
                seen.setdefault(order[i], None)
    return list(seen)
