"""Replicate blocks: independent runs of the same evaluation, told apart by their trial index.

Block ``B`` runs trial ``k`` as global trial index ``B · BLOCK_STRIDE + k`` (so seed
``base_seed + B · BLOCK_STRIDE + k``), a stride larger than any session's rollouts. Block 0 is
the ordinary evaluation, unchanged."""

from __future__ import annotations

BLOCK_STRIDE = 1_000_000
MAX_BLOCK = 1000  # keeps block seeds below 2**32 for adapters that hand them to numpy


def first_trial(block: int) -> int:
    """The global trial index of block ``block``'s trial 0."""
    return block * BLOCK_STRIDE


def block_of(trial: int) -> int:
    return int(trial) // BLOCK_STRIDE


def local_trial(trial: int) -> int:
    return int(trial) % BLOCK_STRIDE


def check_block(value: object) -> int:
    """A block number from a flag: a whole number 0..MAX_BLOCK, else ValueError (one line)."""
    try:
        block = int(str(value))
    except ValueError:
        block = -1
    if not 0 <= block <= MAX_BLOCK:
        raise ValueError(f"a replicate block is a whole number from 0 to {MAX_BLOCK}, got {value!r}")
    return block
