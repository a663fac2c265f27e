"""The performance machinery of a session, registered in every process that runs items: the lean
run protocol, rollouts started ahead (fan-out), retention of finished items and reports, the
garbage collector's heap, and the sequential gate's bounded xdist window."""
