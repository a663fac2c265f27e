"""What outlives a run: the run's and the project's test seals, the project's memory, task keys."""
