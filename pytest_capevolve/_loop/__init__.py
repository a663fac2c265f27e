"""The loop's drivers: what launches sessions and edits candidates between them (the run policy
they share with the sessions is one floor down, in :mod:`pytest_capevolve._policy`)."""
