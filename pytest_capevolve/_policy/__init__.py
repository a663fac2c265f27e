"""The run policy: what a session and the loop drivers both obey.

- :mod:`.booking.commit` (one decision per tag) and :mod:`.booking.memory` (the ledger and the rejected
  memory);
- :mod:`.budget.spend` (what the run has spent against every ceiling) and :mod:`.stop.stop_condition`;
- :mod:`.budget.val_budget` (how much of val is used up) and :mod:`.gate.verdicts` (verdicts from persisted
  rollouts).

Each primitive reads the run dir and the project, pays no rollout, and answers with plain data.
Never pytest: these run in the ``capevolve`` command as well as in sessions.
Refusals are :class:`..exitcodes.Refusal` (exit 2).
"""

from __future__ import annotations
