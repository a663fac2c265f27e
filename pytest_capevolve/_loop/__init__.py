"""The loop's drivers: what launches sessions and edits candidates between them.

- :mod:`.hill_climb` (the loop that runs by itself), :mod:`.merge`, :mod:`.multirep`,
  :mod:`.diagnose`, :mod:`.work` (work copies), :mod:`.prompt` and :mod:`.git_store`;
- :mod:`.cap_evolve`: a cap-evolve project and run, made ours.

The run policy they share with the sessions (commit, spend, stop condition, val budget) is one
floor down, in :mod:`pytest_capevolve._policy`.
"""
