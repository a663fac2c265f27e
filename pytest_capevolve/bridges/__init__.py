"""Bridges: adapters for harnesses people already evaluate with, each an optional extra whose
third-party package only its own module imports (:mod:`.inspect_task`)."""
