"""A way on reprints the command the user typed (``_project/way_on.py``)."""

from __future__ import annotations

import pytest

from pytest_capevolve._project.way_on import VALUELESS, own_flags, pasteable


def test_a_word_after_a_valueless_flag_stays_the_users() -> None:
    typed = ["--capevolve-run", "p", "--capevolve-gate", "tests/test_x.py", "-n", "2", "--capevolve-null=1"]

    flags, ours = own_flags(typed)

    # before: 'tests/test_x.py' was taken as --capevolve-gate's value, and reprinted after it
    assert flags == ["tests/test_x.py", "-n", "2"]
    assert ours == ["--capevolve-run", "p", "--capevolve-gate", "--capevolve-null=1"]
    new_run = pasteable("run pytest --capevolve-run p --capevolve-new-run", args=typed)
    assert new_run == (
        "run pytest tests/test_x.py -n 2 --capevolve-run p --capevolve-gate --capevolve-null=1 --capevolve-new-run"
    )


def test_valueless_names_every_flag_pytest_parses_as_taking_no_value(pytestconfig: pytest.Config) -> None:
    options = vars(pytestconfig.option)
    flags = {
        f"--{k.replace('_', '-')}" for k, v in options.items() if k.startswith("capevolve_") and v is False
    }
    assert flags == VALUELESS
