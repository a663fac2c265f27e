"""A candidate is its bytes: known bytes, near repeats, decisions that stand, decided-bytes memory."""
