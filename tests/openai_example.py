"""examples/openai_agent's files as both halves of test_openai_agent load them: the example's
folder, the stand-in's prices, and its standin_server.py imported once (the ``standin`` fixture
in tests/conftest.py runs it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "openai_agent"
PRICE_IN, PRICE_OUT = 0.15, 0.60  # standin-small in the example's openai.yaml, USD per 1M tokens


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"openai_example_{name}", EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


standin_server = _module("standin_server")
