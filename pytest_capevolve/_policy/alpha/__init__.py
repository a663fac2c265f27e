"""The run's α: gate settings frozen with it, a loop's schedule, the levels verify checks, resolution."""
