"""What the run decided: state.json folded from the log, the best's rule, forced labels, verdicts."""
