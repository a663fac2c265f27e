"""What a run's sessions leave each other: rollout claims, live and stop markers, the order key."""
