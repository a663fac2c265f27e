"""Every object the session registers with pytest's plugin manager must be hashable: pluggy
keeps plugins in sets and dicts. A dataclass with the default ``eq=True`` has ``__hash__ =
None``; with pytest 9.0 ``--capevolve-sequential`` stopped at INTERNALERROR ``TypeError:
unhashable type: 'SequentialGate'``. Checked for every class in the session floor that carries
a hook, so the next plugin class cannot repeat it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest_capevolve._session as session_floor


def _plugin_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(session_floor.__path__, f"{session_floor.__name__}."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(name.startswith("pytest_") for name in vars(cls)):
                found.append(cls)
    return found


def test_every_plugin_class_is_hashable() -> None:
    classes = _plugin_classes()
    names = {cls.__name__ for cls in classes}
    assert {"SequentialGate", "FinalizeSession", "CapevolveReporter"} <= names  # the walk finds them
    unhashable = [cls.__qualname__ for cls in classes if cls.__hash__ is None]
    assert unhashable == []
