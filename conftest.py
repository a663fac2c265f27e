# Repository-level conftest: keeps pytest's rootdir here so `pytest` from the checkout collects
# tests/ and microcases/ (see [tool.pytest.ini_options] in pyproject.toml).
