"""Gate rules and verdicts: candidate vs best on val, from reward matrices to a decision with its numbers."""
