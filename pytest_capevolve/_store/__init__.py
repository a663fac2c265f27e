"""The run dir: the only reader and writer of its files (rollouts, events, state, verdicts, the seal)."""
