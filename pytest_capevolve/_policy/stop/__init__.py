"""When to stop: the stop condition's grammar and terms, and whether more rollouts fit the ceilings."""
