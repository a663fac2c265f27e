"""Running a rollout or a microcase, wherever it runs (the controller, an xdist worker, a remote
copy): the one call of the agent and scorer (:mod:`.runner`), rollouts in flight, their output
routed to their own item, the microcase checks, and workers on a copy of the project."""
