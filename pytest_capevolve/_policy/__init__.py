"""The run policy: what a session and the loop drivers both obey.

Each primitive reads the run dir and the project, pays no rollout, and answers with plain data. Never pytest:
these run in the ``capevolve`` command as well as in sessions. Refusals are :class:`..exitcodes.Refusal`."""
