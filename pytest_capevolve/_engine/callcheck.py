"""Child process of a ``call`` microcase: import a candidate's function, call it, report JSON.

Run as ``python -m pytest_capevolve._engine.callcheck`` in the candidate folder, the request on
stdin, so the candidate cannot touch the judging session and a timeout can stop it. Prints go to
stderr; stdout carries two JSON lines: first ``confinement``, the label of the boundary the call runs in,
in the words a sandbox child's rollouts use (``unconfined (…)`` where the kernel refused it), written and
flushed before the candidate's file is loaded (candidate code can write fd 1 too, but not take back a line
already in the pipe); last ``value``, ``raised``/``raised_mro``/``message``, or ``setup_error``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from .._confine.launch import confined


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


def main() -> None:
    request = json.loads(sys.stdin.read())
    state = confined(request.get("boundary"))  # the sandbox child's boundary, before any candidate byte runs
    sys.stdout.write(json.dumps({"confinement": state.label}) + "\n")
    sys.stdout.flush()  # in the pipe before the candidate's file loads: the label is the process's own
    with contextlib.redirect_stdout(sys.stderr):
        result = _call(request)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
