"""Results other tools already made, read and compared with the gate's own test.

``capevolve compare A B`` (and the ``capevolve_compare`` fixture) read two or more finished
runs — an inspect_ai log, lm-evaluation-harness samples, promptfoo or deepeval output, or a
plain CSV / JSONL of (task id, trial, reward) — pair them by task, and decide each against the
first with the gate's exact one-sided paired sign-flip test. One job per module:

- :mod:`.results` — the one shape every reader returns (:class:`ImportedRun` of
  :class:`Outcome`), and the one error (:class:`ResultsError`);
- one module per source (:mod:`.table`, :mod:`.inspect_log`, :mod:`.lm_eval`,
  :mod:`.promptfoo`, :mod:`.deepeval`), each joining :data:`.readers.READERS` with one line;
- :mod:`.pairing` — two runs made into the gate's reward matrices;
- :mod:`.compare` — the decisions (the gate's :func:`~.._decide.gate.decide`, Holm across
  pairs) and what holds for imported results and what does not.

Reads files and nothing else: no run dir, no pytest. Third-party readers (inspect_ai) are
imported only by the reader that needs them.
"""
