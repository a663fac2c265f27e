"""The ``capevolve`` command: run-dir work that pays no rollouts (and ``check``, which pays one).

Each subcommand prints plain lines and exits with the codes documented in the README.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .adapter import AdapterError, AdapterRunner, load_adapter, load_tasks
from .spec import SpecError, load_spec


def cmd_check(args: argparse.Namespace) -> int:
    """Verify a project's spec and adapter before any rollout is paid for."""
    problems: list[str] = []

    def ok(message: str) -> None:
        print(f"ok    {message}")

    def fail(message: str) -> None:
        problems.append(message)
        print(f"FAIL  {message}")

    try:
        spec = load_spec(args.project)
        ok(f"spec {spec.path}")
        adapter = load_adapter(spec.adapter, spec.project_dir)
        ok(f"adapter {spec.adapter} has tasks, run_target and score")
        first = load_tasks(adapter, spec.adapter)
        second = load_tasks(adapter, spec.adapter)
    except (SpecError, AdapterError) as exc:
        fail(str(exc))
        return 1
    ok(f"{len(first)} tasks, ids unique")
    if list(first) != list(second) or any(first[k] != second[k] for k in first):
        fail("tasks('all') returned different tasks on a second call; make it deterministic")
    else:
        ok("tasks are the same across two calls")
    runner = AdapterRunner(adapter)
    task = first[sorted(first)[0]]
    try:
        with runner.live(spec.capability_path) as ctx:
            rollout = runner.run_target(task, ctx, seed=spec.base_seed, split="val")
        if rollout.error:
            fail(f"run_target({task.id!r}) reported an infra error: {rollout.error}")
            return 1
        scores = [runner.score(task, rollout) for _ in range(2)]
    except NotImplementedError as exc:
        fail(f"a required method is not implemented: {exc}")
        return 1
    except Exception as exc:
        fail(f"running task {task.id!r} with the seed capability raised {exc!r}")
        return 1
    from .adapter import check_reward

    try:
        rewards = [check_reward(s.reward, f"score({task.id!r})") for s in scores]
    except AdapterError as exc:
        fail(str(exc))
        return 1
    if rewards[0] != rewards[1] or scores[0].feedback != scores[1].feedback:
        fail(f"score is not deterministic: re-scoring one rollout gave {rewards[0]} then {rewards[1]}")
    else:
        ok(f"score is deterministic on a re-score (reward {rewards[0]:g} on task {task.id!r})")
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capevolve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="verify a project's spec and adapter")
    check.add_argument("project", type=Path, help="project folder or capevolve.yaml")
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
