"""The project's own commands: ``init`` (a new project that runs offline as written),
``check`` (spec and adapter before any rollout is paid), ``microcase gen`` (a skeleton microcase
from a failing rollout), ``import-cap-evolve`` (which writes a project, so it takes no
``--project``) and ``skills`` (where the playbooks for coding agents are installed)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import exitcodes
from .common import (
    UsageError,
    add_dropped,
    add_project_args,
    emit,
    existing_project,
    human,
    project_folder,
    project_given,
    project_of,
    said_as,
)

SKILLS = Path(__file__).resolve().parent.parent / "skills"


def cmd_check(args: argparse.Namespace) -> int:
    """Verify a project's spec and adapter before any rollout is paid for."""
    checks: list[dict[str, Any]] = []
    code = _check(args, checks)
    emit(args, {"ok": code == 0, "checks": checks}, None)
    return code


def _check(args: argparse.Namespace, checks: list[dict[str, Any]]) -> int:
    from .._engine.judging import judge_seed, require_prefer
    from .._engine.runner import run_and_score
    from .._engine.sandbox import isolated
    from .._policy.alpha.gate_settings import check_margin
    from .._project.adapter import AdapterError, check_reward, load_adapter, load_tasks
    from .._project.spec import SpecError, load_spec, splits_for
    from .._store.rundir import RunDir, RunDirError

    out = human(args)
    project = project_folder(args)  # not a project at all: a usage error, as in every command

    def ok(message: str) -> None:
        checks.append({"ok": True, "message": message})
        print(f"ok    {message}", file=out)

    def fail(message: str) -> int:
        checks.append({"ok": False, "message": message})
        print(f"FAIL  {message}", file=out)
        return exitcodes.CHECK_FAILED

    try:
        spec = load_spec(project)
        if args.run_id is not None:
            RunDir.resolve(spec.project_dir, args.run_id, create=False)
        ok(f"spec {spec.path}")
        adapter = load_adapter(spec.adapter, spec.project_dir)
        require_prefer(adapter, spec.adapter, spec.gate_mode)
        check_margin(spec, sequential=False)  # what the gate session refuses, said before paying
        ok(f"adapter {spec.adapter} has tasks, run_target and score")
        first = load_tasks(adapter, spec.adapter)
        second = load_tasks(adapter, spec.adapter)
        splits = splits_for(spec, first)  # its test split is sealed: never run or named here
    except (SpecError, RunDirError, AdapterError) as exc:
        return fail(str(exc))
    ok(f"{len(first)} tasks, ids unique")
    unreachable = _margin_out_of_reach(spec, len(splits["val"]))
    if unreachable:  # not a failure: a better candidate still passes; said before paying
        checks.append({"ok": True, "note": True, "message": unreachable})
        print(f"note  {unreachable}", file=out)
    if list(first) != list(second) or any(first[k] != second[k] for k in first):
        fail("tasks('all') returned different tasks on a second call; make it deterministic")
    else:
        ok("tasks are the same across two calls")
    _against_the_run(spec, args.run_id, first, ok, fail)
    try:  # the seed's code runs in a child, as a candidate's does
        runner = isolated(adapter, spec.adapter, spec.project_dir, spec.judge_rescores, spec=spec)
    except AdapterError as exc:
        return fail(str(exc))
    task = first[min(set(first) - set(splits["test"]), default=min(first))]
    try:
        scored = run_and_score(runner, task, spec.capability_path, seed=spec.base_seed, split="val")
    finally:
        runner.close()
    if scored.rollout is None or scored.reward is None:
        return fail(f"task {task.id!r} with the seed capability gave an infra error: {scored.infra_error}")
    try:
        # a stochastic judge's re-score at a seed the first score's re-scores did not use
        again = runner.score_now(task, scored.rollout, seed=judge_seed(spec.base_seed, spec.judge_rescores))
        reward = check_reward(again.reward, f"score({task.id!r})")
    except Exception as exc:
        return fail(f"re-scoring task {task.id!r} raised {exc!r}")
    if runner.stochastic:
        ok(
            f"score is declared stochastic (stochastic_score = True): re-scoring one rollout gave "
            f"{scored.reward:g} then {reward:g}; judge_rescores: {spec.judge_rescores} "
            "score(s) per rollout, averaged"
        )
    elif reward != scored.reward or str(again.feedback or "") != scored.feedback:
        fail(f"score is not deterministic: re-scoring one rollout gave {scored.reward} then {reward}")
    else:
        ok(f"score is deterministic on a re-score (reward {reward:g} on task {task.id!r})")
    _seed_microcases(spec, ok, fail)
    return exitcodes.OK if all(check["ok"] for check in checks) else exitcodes.CHECK_FAILED


def _against_the_run(
    spec: Any,
    run_id: str | None,
    tasks: dict[str, Any],
    ok: Callable[[str], None],
    fail: Callable[[str], int],
) -> None:
    """What the next session of the current run refuses, said with its way on: a harness moved since the
    run locked it, a seed edited while the seed is the best. Read only: nothing written, nothing run."""
    from .._loop.task_eval import harness_moved
    from .._project.candidate import SEED_TAG, CandidateError, content_hash
    from .._project.way_on import pasteable
    from .._store.rundir import RunDir, RunDirError
    from .._store.sessions.order_secret import OrderSecretError

    # the session's refusal names its flag, to add to the command typed; here there is none: the command
    new_run = pasteable(
        "(`pytest --capevolve-run PROJECT --capevolve-new-run -q`, then `capevolve baseline PROJECT`)",
        spec.project_dir,
    )
    try:
        rundir = RunDir.resolve(spec.project_dir, run_id, create=False)
        rundir.order_secret.recorded()  # an older version's run: refused, as every session of the run would
        if (moved := harness_moved(spec, rundir, tasks)) is not None:
            fail(moved.replace("(--capevolve-new-run)", new_run))
            return
        if rundir.state.best() == SEED_TAG:  # the seed is registered again by the next session
            source = spec.capability_path
            rundir.snapshots.refuse_other_bytes(SEED_TAG, source, content_hash(source))
    except OrderSecretError as exc:
        fail(pasteable(str(exc), spec.project_dir))
        return
    except RunDirError:
        return  # no run yet (a damaged one is `capevolve verify`'s to say): nothing to compare
    except CandidateError as exc:
        fail(str(exc).replace("(--capevolve-new-run)", new_run))
        return
    ok(f"run {rundir.run_id}: the harness and the seed are the ones it measured")


def _margin_out_of_reach(spec: Any, n_val: int) -> str | None:
    """Why a candidate only as good as the best could not be shown no worse than
    ``gate_margin`` on ``n_val`` val tasks (even at the full ``gate_alpha``), or None."""
    if not spec.gate_margin:
        return None
    import numpy as np

    from .._stats.margin import lower_bound

    reach = lower_bound(np.zeros(n_val), float(spec.gate_alpha))
    if reach > spec.gate_margin:
        return None
    return (
        f"gate_margin {spec.gate_margin:g}: on {n_val} val tasks a candidate only as good as the best is "
        f"rejected (identical results bound the mean delta at {reach:+.4f} at best, α = {spec.gate_alpha:g});"
        f" to show 'no worse', set gate_margin below {reach:+.4f} or give the val split more tasks"
    )


def _seed_microcases(spec: Any, ok: Callable[[str], None], fail: Callable[[str], int]) -> None:
    """The project's microcases, run on the seed: one the seed fails rejects every candidate,
    and mending it later is a changed harness, so ``check`` says so before anything is paid."""
    from .._engine.checks import ProjectEnv
    from .._engine.checks import run as run_microcase
    from .._project.microcase import MicrocaseError, load_project

    env = ProjectEnv(spec)
    try:
        cases = load_project(spec.project_dir)
        failed = [
            (case, outcome)
            for case in cases
            if not (outcome := run_microcase(case, spec.capability_path, env)).ok
        ]
    except MicrocaseError as exc:
        fail(str(exc))
        return
    finally:
        env.close()
    for case, outcome in failed:
        fail(
            f"microcase {case.id!r} ({case.file.relative_to(spec.project_dir)}) fails on the seed: expected "
            f"{outcome.expected}, got {outcome.got}; every gate would reject a candidate that keeps it "
            "(micro_test_fail). Mend the microcase (or the seed) now: after the first session a changed "
            "microcase is a changed harness, and the run's baseline is paid again"
        )
    if cases and not failed:
        ok(f"{len(cases)} microcase(s) pass on the seed")


def cmd_microcase_gen(args: argparse.Namespace) -> int:
    """Write a skeleton microcase from a failing rollout; pays nothing, copies no gold."""
    from .._engine.checks import ProjectEnv
    from .._project.adapter import AdapterError
    from .._project.candidate import TAG_RE
    from .._project.microcase import ID_RE, MICROCASES_DIR, MicrocaseError
    from .._project.microcase_gen import skeleton
    from .._store.rollouts.record import RecordError, RolloutRecord
    from .._store.rundir import RUNS_DIR

    if project_given(args):
        existing_project(args)
    source = args.source.resolve()
    try:
        record = RolloutRecord.loads(source.read_text(encoding="utf-8"), str(source))
    except (OSError, RecordError) as exc:
        raise UsageError(f"not a rollout record (a rollouts/<split>/*.json file): {exc}") from None
    task_id = record.task_id
    if record.split == "test":
        raise UsageError(
            f"{source} is a test-split rollout; the test split is sealed, and a microcase made "
            "from it would steer the search with held-out data"
        )
    project = project_of(args).resolve() if project_given(args) else _project_holding(source, RUNS_DIR)
    with said_as(UsageError, MicrocaseError, AdapterError):
        env = ProjectEnv.load(project)
        try:
            gold = env.task(task_id).target
        finally:
            env.close()  # no rollout ran, but nothing it made outlives the command
    if not TAG_RE.match(args.cluster):
        raise UsageError(f"--cluster {args.cluster!r}: use letters, digits, '.', '-' or '_'")
    case_id = args.id or f"{args.cluster}-{task_id}"
    if not ID_RE.match(case_id):
        raise UsageError(f"microcase id {case_id!r} is not usable; give one with --id")
    out = (args.out or project / MICROCASES_DIR / f"{case_id}.yaml").resolve()
    capability = env.spec.capability_path.resolve()
    if out.is_relative_to(capability) and not out.is_relative_to(project / MICROCASES_DIR):
        raise UsageError(f"{out} is inside the capability folder {capability}, where a candidate reads")
    if out.exists():
        raise UsageError(f"{out} exists; choose another --id or --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    # committed with the project: the source is named relative to it, never by a machine's path
    named = source.relative_to(project) if source.is_relative_to(project) else Path(source.name)
    out.write_text(
        skeleton(record.to_json(), cluster=args.cluster, case_id=case_id, gold=gold, source=named.as_posix())
    )
    answer = {"wrote": out, "id": case_id, "cluster": args.cluster, "task_id": task_id}
    line = f"wrote {out}: fill in its FILL_IN, then run: pytest {out.parent} --capevolve-candidate DIR"
    return emit(args, answer, lambda _: [line])


def _project_holding(path: Path, runs_dir: Path) -> Path:
    """The project holding a run dir file: the folder above ``.capevolve/runs/``."""
    for folder in path.parents:
        if (folder / runs_dir).is_dir() and path.is_relative_to(folder / runs_dir):
            return folder
    raise UsageError(f"{path} is not inside a project's {runs_dir}; give --project")


def cmd_import_cap_evolve(args: argparse.Namespace) -> int:
    """Make a cap-evolve project a project here."""
    from .._loop.cap_evolve.importer import import_cap_evolve, render

    return emit(args, import_cap_evolve(args.src, args.dest), None if args.json else render)


def cmd_init(args: argparse.Namespace) -> int:
    """Write a runnable project into DIR."""
    from .._project.scaffold import write_project

    written = write_project(args.dir.resolve())  # a file in the way: a Refusal, exit 2
    project = args.dir.resolve()
    answer = {
        "project": str(project),
        "files": [str(p.relative_to(project)) for p in written],
        "next": [f"cd {project}", "capevolve check", "capevolve baseline"],
    }
    lines = [f"wrote a capevolve project in {project}:", *(f"  {name}" for name in answer["files"])]
    return emit(args, answer, lambda _: [*lines, "next: " + " && ".join(answer["next"])])


def skill_front_matter(path: Path) -> dict[str, str]:
    """The ``name`` and ``description`` of a SKILL.md's front matter."""
    import yaml

    text = path.read_text(encoding="utf-8")
    head = text.split("---", 2)[1] if text.startswith("---") else ""
    data = yaml.safe_load(head) or {}
    return {"name": str(data.get("name", "")), "description": str(data.get("description", ""))}


def cmd_skills(args: argparse.Namespace) -> int:
    """List the agent playbooks shipped with the package (``--path``: only their folder)."""
    if args.path:
        print(SKILLS)
        return exitcodes.OK
    found = [{**skill_front_matter(p), "path": str(p)} for p in sorted(SKILLS.glob("*/SKILL.md"))]
    return emit(
        args,
        {"skills": found, "path": str(SKILLS)},
        lambda a: [f"{s['name']}: {s['path']}" for s in a["skills"]],
    )


def register(sub: Any) -> None:
    """The project's commands on the ``capevolve`` parser."""
    check = sub.add_parser("check", help="verify a project's spec and adapter")
    add_project_args(check)
    check.set_defaults(func=cmd_check)
    micro = sub.add_parser("microcase", help="work with microcases").add_subparsers(
        dest="action", required=True
    )
    gen = micro.add_parser("gen", help="write a skeleton microcase from a failing rollout")
    add_project_args(gen, run_id=False)
    gen.add_argument("--from", dest="source", type=Path, required=True, metavar="ROLLOUT_FILE")
    gen.add_argument("--cluster", required=True, help="the failure cluster it guards")
    gen.add_argument("--id", help="microcase id (default CLUSTER-TASK)")
    gen.add_argument("--out", type=Path, help="default: PROJECT/microcases/ID.yaml")
    gen.set_defaults(func=cmd_microcase_gen)
    imp = sub.add_parser("import-cap-evolve", help="make a cap-evolve project one here")
    imp.add_argument("src", type=Path, help="cap-evolve's project folder or its spec file")
    imp.add_argument("dest", type=Path, nargs="?", default=Path("."), help="where to write (default .)")
    add_dropped(
        imp,
        "--run",
        "a cap-evolve run's rollouts were not recorded by capevolve's record keeper and its gate made its "
        "decisions: import the project (capevolve import-cap-evolve SRC DIR) and start with a baseline there",
    )
    imp.add_argument("--json", action="store_true", help="print only the JSON report on stdout")
    imp.set_defaults(func=cmd_import_cap_evolve, refusals=True)
    init = sub.add_parser(
        "init", help="write a new project that runs offline (spec, adapter, capability, microcase, candidate)"
    )
    init.add_argument("dir", type=Path, nargs="?", default=Path("."), help="where to write it (default .)")
    add_dropped(
        init, "--from-cap-evolve", "import a cap-evolve project with: capevolve import-cap-evolve SRC DIR"
    )
    init.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")
    init.set_defaults(func=cmd_init, refusals=True)
    skills = sub.add_parser("skills", help="the playbooks for coding agents shipped with the package")
    skills.add_argument("--path", action="store_true", help="print only the folder that holds them")
    skills.add_argument("--json", action="store_true", help="print only JSON on stdout (the rest to stderr)")
    skills.set_defaults(func=cmd_skills)
