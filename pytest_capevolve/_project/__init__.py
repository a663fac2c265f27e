"""What the user wrote: the spec, the adapter contract, candidates, the tamper guard, splits and microcases.

Imports nothing else of ours: everything above builds on it."""
