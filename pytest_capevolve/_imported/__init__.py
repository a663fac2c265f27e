"""Results other tools already made, read and compared with the gate's own test.

``capevolve compare A B`` (and the ``capevolve_compare`` fixture) read finished runs (inspect_ai,
lm-evaluation-harness, promptfoo, deepeval, or a plain CSV / JSONL), pair them by task
(:mod:`.pairing`) and decide each against the first (:mod:`.compare`). Every reader returns an
:class:`.results.ImportedRun` or raises :class:`.results.ResultsError`, and joins
:data:`.readers.READERS` with one line. Reads files only: no run dir, no pytest."""
