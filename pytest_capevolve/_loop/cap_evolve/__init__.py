"""cap-evolve's way in: its project made a project here (``capevolve import-cap-evolve``). The
spec-key table the spec itself needs stays in :mod:`pytest_capevolve._project.cap_evolve_keys`, a
floor below."""
