"""Results other tools already made, read and compared with the gate's own test.

``capevolve compare A B`` reads finished runs, pair them by
task (:mod:`.pairing`) and decide each against the first (:mod:`.compare`). Reads files only: no
run dir, no pytest."""
