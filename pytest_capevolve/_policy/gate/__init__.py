"""Verdicts from persisted rollouts: evidence, the re-derived gate, a judge's preferences and noise."""
