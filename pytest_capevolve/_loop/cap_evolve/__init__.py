"""cap-evolve's way in: its project and one of its runs made a project and a run here
(``capevolve import-cap-evolve``). The spec-key table the spec itself needs stays in
:mod:`pytest_capevolve._project.cap_evolve_keys`, a floor below."""
