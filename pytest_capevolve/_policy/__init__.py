"""The run policy: what a session and the loop drivers both obey.

- :mod:`.commit` (one decision per tag) and :mod:`.memory` (the ledger and the rejected memory);
- :mod:`.spend` (what the run has spent against every ceiling) and :mod:`.stop_condition`;
- :mod:`.val_budget` (how much of val is used up) and :mod:`.verdicts` (verdicts from persisted
  rollouts).

Each primitive reads the run dir and the project, pays no rollout, and answers with plain data.
Never pytest: these run in the ``capevolve`` command as well as in sessions.
Refusals are :class:`..exitcodes.Refusal` (exit 2).
"""

from __future__ import annotations
