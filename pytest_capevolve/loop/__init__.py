"""The optimize loop's primitives: each reads the run dir, refuses what would corrupt the
record, and returns one JSON-able answer (work copies, commit, spend, diagnose, ...)."""
