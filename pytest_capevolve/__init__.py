"""pytest-capevolve: honest, pytest-native measurement of changes to an AI agent's capability."""

from __future__ import annotations

from ._project.adapter import (
    CapabilityAdapter,
    Rollout,
    Score,
    Task,
)

__all__ = ["CapabilityAdapter", "Rollout", "Score", "Task"]
__version__ = "0.1.0"
