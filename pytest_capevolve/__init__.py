"""pytest-capevolve: honest, pytest-native measurement of changes to an AI agent's capability."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._project.adapter import CapabilityAdapter, Rollout, Score, Task

__all__ = ["CapabilityAdapter", "Rollout", "Score", "Task"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """The public names, imported on first use: pytest imports this package for its plugin in
    every session, and most of them never touch an adapter."""
    if name in __all__:
        from ._project import adapter

        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
