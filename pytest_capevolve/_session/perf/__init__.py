"""The performance machinery of a session: the lean run protocol, rollouts started ahead (fan-out),
retention of finished items and reports, the garbage collector's heap, the sequential gate's xdist window."""
