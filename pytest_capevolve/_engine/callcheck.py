"""Child process of a ``call`` microcase: import a candidate's function, call it, report JSON.

Run as ``python -m pytest_capevolve._engine.callcheck`` in the candidate folder, the request on
stdin, so the candidate cannot touch the judging session and a timeout can stop it. Prints go to
stderr; stdout carries one JSON line: ``value``, ``raised``/``raised_mro``/``message``, or ``setup_error``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any


def _call(request: dict[str, Any]) -> dict[str, Any]:
    folder = Path.cwd()
    path = folder / request["file"]
    if not path.is_file():
        return {"setup_error": f"{request['file']} does not exist in the candidate"}
    sys.path.insert(0, str(path.parent))
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("capevolve_microcase_target", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        return {"setup_error": f"importing {request['file']} raised {type(exc).__name__}: {exc}"}
    function = getattr(module, request["function"], None)
    if not callable(function):
        return {"setup_error": f"{request['file']} has no function {request['function']!r}"}
    try:
        value = function(*request["args"], **request["kwargs"])
    except Exception as exc:
        mro = [cls.__name__ for cls in type(exc).__mro__]
        return {"raised": type(exc).__name__, "raised_mro": mro, "message": str(exc)}
    return {"value": json.loads(json.dumps(value, default=repr))}


def _confine(boundary: dict[str, Any] | None) -> None:
    """This process inside the sandbox child's boundary before any byte of the candidate runs, as
    a sandbox child confines itself (:func:`.sandbox_child.confined`): where the kernel offers no
    Landlock (or refuses the rules) it runs unconfined, as the session's children do."""
    from .._confine.landlock import Boundary, confine
    from .._confine.launch import no_typing

    if boundary is None:
        return
    try:
        state = confine(Boundary.from_json(boundary))
    except (OSError, ValueError):  # nothing was applied: confine() restricts last
        return
    if state.confined:
        no_typing()


def main() -> None:
    request = json.loads(sys.stdin.read())
    _confine(request.get("boundary"))
    with contextlib.redirect_stdout(sys.stderr):
        result = _call(request)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
