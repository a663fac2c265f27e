"""The event log: events.jsonl, its chain and kinds, its views, what it says each rollout came to."""
