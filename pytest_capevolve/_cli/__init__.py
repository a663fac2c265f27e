"""The ``capevolve`` command: parsing and printing only, one module per command group, on one
project/run resolver and printer (:mod:`.common`); the logic lives in the floors below."""
