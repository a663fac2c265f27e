"""The optimize loop's primitives: each reads the run dir and the project, pays no rollout, and
answers with one JSON-ready dict (printed by the ``capevolve`` command).

- :mod:`.stop_condition`: the spec's free-text ``stop_condition`` read by a fixed grammar into
  predicates (and the clauses it could not read), evaluated against measured actuals;
- :mod:`.spend`: what the run has spent against every ceiling, whether N more siblings fit
  (:func:`.spend.afford`, reusable by a planner before paying), and stop / narrow / continue;
- :mod:`.diagnose`: a tag's per-task bands and failure clusters from persisted rollouts, and the
  reflective dataset an optimizer reads (gold answers redacted);
- :mod:`.work` (work copies), :mod:`.commit` (one decision per tag) and :mod:`.memory` (the
  ledger and the rejected memory) — these write, through the run dir, under its lock.

They import project/, store/, decide/ and stats/; never pytest, the plugin or the CLI.
"""


class Refusal(Exception):
    """A loop primitive will not answer as asked (no run yet, unknown tag, sealed split); the
    message says what was refused and why. The command prints it as one line and exits 2."""
