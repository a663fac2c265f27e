"""The performance machinery of a session: the lean run protocol, rollouts started ahead (fan-out, send
ahead), retention of finished items and reports and the frozen heap, the sequential gate's xdist window."""
