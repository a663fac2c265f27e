"""Collectors and items: every owed rollout of the plan becomes one pytest item (:mod:`.nodes`),
every microcase another (:mod:`.microcases`); :mod:`.plan` is the plan the controller sends."""
