"""Start a command inside a boundary: ``python -m pytest_capevolve._confine.launch JSON -- CMD…``.

The launcher confines itself to the :class:`.landlock.Boundary` in ``JSON``, then ``exec``s the
command, which can never lift it. Without Landlock it says so on stderr and runs the command
unconfined (the caller labels the run).

Whether the optimizer was confined is said by the process that started it, never the optimizer:
``capevolve agent``'s broker or ``capevolve hill-climb`` passes it in :data:`OPTIMIZER_ENV` to the
commands it runs, and the record copies it. A confined agent cannot forge it, since the broker
builds each command's environment itself; a process of the same user outside the boundary can
(the threat model's broker section: not held)."""

from __future__ import annotations

import json
import os
import sys

from .landlock import Boundary, Confinement, confine

CONFINEMENT_ENV = "CAPEVOLVE_CONFINEMENT"  # what the started command finds: the label's JSON
OPTIMIZER_ENV = "CAPEVOLVE_OPTIMIZER_CONFINEMENT"


def environment(state: Confinement, by: str) -> dict[str, str]:
    """The variable a command run for the optimizer carries (set by its starter, ``by``)."""
    return {OPTIMIZER_ENV: json.dumps({**state.as_json(), "label": state.label, "by": by}, sort_keys=True)}


def optimizer_label() -> str | None:
    """The optimizer's label as its starter passed it; None when none did."""
    try:
        fields = json.loads(os.environ.get(OPTIMIZER_ENV, ""))
    except ValueError:
        return None
    label = fields.get("label") if isinstance(fields, dict) else None
    return label if isinstance(label, str) else None


def command(boundary: Boundary, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", __name__, json.dumps(boundary.as_json()), "--", *argv]


def main(args: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if args is None else args)
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: python -m pytest_capevolve._confine.launch BOUNDARY_JSON -- CMD [ARGS…]")
    boundary = Boundary.from_json(json.loads(args[0]))
    argv = args[2:]
    state = confine(boundary)
    if not state.confined:
        print(f"capevolve: running {argv[0]} {state.label}", file=sys.stderr)
    os.environ[CONFINEMENT_ENV] = json.dumps(state.as_json())
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.exit(f"capevolve: cannot start {argv[0]}: {exc.strerror}")


if __name__ == "__main__":
    main()
