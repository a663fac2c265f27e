"""``capevolve import-cap-evolve SRC [DEST] [--run RUN_DIR]``: a cap-evolve project, and one
of its runs, made a project and a run here.

SRC is cap-evolve's project folder (``.capevolve/project/`` with ``capevolve.yaml`` and
``adapters/adapter.py``), the folder holding ``.capevolve/project/``, or a spec file of it.
Written to DEST (default ``.``), never over an existing file:

- ``capevolve.yaml``: every cap-evolve key mapped (:mod:`..project.cap_evolve_keys`), the
  others listed in a comment with why each is not used here;
- ``adapters/``: a copy whose ``from cap_evolve import …`` lines import ours instead;
- the capability folder (with a run: the run's own seed snapshot, the bytes it measured);
- with ``--run``: the run's frozen splits as ``cap_evolve_splits.json`` and a new run in
  ``DEST/.capevolve/runs/`` holding its candidates, every rollout (infra errors stay missing
  data), its best, and — when cap-evolve's test seal was burned — a burned seal with the test
  score it recorded, so no session here can look at the test split a second time.

Pays no rollout. Runs where the command is run; imports nothing of pytest.
"""

from __future__ import annotations

import ast
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from ..._policy import Refusal
from ..._project.candidate import SEED_TAG, CandidateError
from ..._project.cap_evolve_keys import translate
from ..._project.spec import SPEC_FILENAME, SpecError, load_spec
from ..._project.yamlfile import YamlError, read_yaml
from ..._store.files import RunDirError, atomic_write_json
from ..._store.rundir import RunDir
from .run_reader import CapEvolveRun, read_run

SPLITS_FILE = "cap_evolve_splits.json"
OUR_NAMES = frozenset({"CapabilityAdapter", "Rollout", "Score", "Task"})
_IMPORT = re.compile(r"^(\s*)from\s+cap_evolve(?:\.(?:types|adapter))?\s+import\s+(.+?)\s*$")
_OTHER = re.compile(r"^\s*(?:import\s+cap_evolve\b|from\s+cap_evolve[.\w]*\s+import\b)")


def locate_spec(src: Path) -> Path:
    """cap-evolve's spec file for SRC (a spec file, its project folder, or the folder above)."""
    src = src.expanduser().resolve()
    if src.is_file():
        return src
    for candidate in (src / SPEC_FILENAME, src / ".capevolve" / "project" / SPEC_FILENAME):
        if candidate.is_file():
            return candidate
    raise Refusal(
        f"{src}: no cap-evolve spec there (looked for {SPEC_FILENAME} and .capevolve/project/"
        f"{SPEC_FILENAME}); give the project folder or the spec file"
    )


def import_cap_evolve(src: Path, dest: Path, run_dir: Path | None = None) -> dict[str, Any]:
    spec_path = locate_spec(src)
    project = spec_path.parent
    try:
        raw = read_yaml(spec_path) or {}
    except YamlError as exc:
        raise Refusal(str(exc)) from None
    if not isinstance(raw, dict):
        raise Refusal(f"{spec_path}: a cap-evolve spec is a mapping of keys to values")
    translation = translate(raw)
    spec_keys = dict(translation.spec)
    adapter_dir = project / "adapters"
    if not (adapter_dir / "adapter.py").is_file():
        raise Refusal(f"{adapter_dir / 'adapter.py'} is missing: cap-evolve's adapter lives there")
    adapter_class, adapter_note = adapter_class_of(adapter_dir / "adapter.py")
    run = _read(run_dir) if run_dir is not None else None

    dest = dest.expanduser().resolve()
    capability = Path(str(spec_keys.get("capability_path") or "seed_capability"))
    capability_dest = (
        Path(capability.name) if capability.is_absolute() or ".." in capability.parts else capability
    )
    capability_src = project / capability
    if run is not None and SEED_TAG in run.snapshots:
        capability_src = run.snapshots[SEED_TAG]  # the bytes the run measured as its seed
    if not capability_src.is_dir():
        raise Refusal(f"capability folder {capability_src} is missing (cap-evolve key capability_path)")
    splits_dest: Path | None = None
    if run is not None:
        splits_dest = Path(SPLITS_FILE)
    elif spec_keys.get("split_ids_file"):
        splits_dest = Path(Path(str(spec_keys["split_ids_file"])).name)
    writes = [Path(SPEC_FILENAME), Path("adapters"), capability_dest]
    if splits_dest is not None:
        writes.append(splits_dest)
    taken = [str(dest / p) for p in writes if (dest / p).exists()]
    if taken:
        raise Refusal(f"{', '.join(taken)} already exist(s); import into an empty folder (DEST)")

    created = [dest / p for p in writes]
    if not (dest / ".capevolve").exists():
        created.append(dest / ".capevolve")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        adapter_report = _copy_adapter(adapter_dir, dest / "adapters", adapter_class, adapter_note)
        shutil.copytree(capability_src, dest / capability_dest, ignore=shutil.ignore_patterns("__pycache__"))
        spec_keys["capability_path"] = capability_dest.as_posix()
        spec_keys["adapter"] = f"adapters/adapter.py:{adapter_class}"
        if run is not None:
            assert splits_dest is not None
            atomic_write_json(dest / splits_dest, {k: run.splits[k] for k in ("train", "val", "test")})
            spec_keys["split_ids_file"] = splits_dest.as_posix()
            translation.notes["split_ids_file"] = f"the run's frozen splits, written to {splits_dest}"
            spec_keys["base_seed"] = run.split_seed
        elif splits_dest is not None:
            shutil.copy2(project / str(spec_keys["split_ids_file"]), dest / splits_dest)
            spec_keys["split_ids_file"] = splits_dest.as_posix()
        # cap-evolve's trial k runs with seed split_seed + k: the same seeds keep trials paired here
        base_seed = spec_keys.setdefault("base_seed", int(spec_keys.get("split_seed") or 0))
        translation.notes["base_seed"] = f"{base_seed}: cap-evolve's trial k runs with seed split_seed + k"
        (dest / SPEC_FILENAME).write_text(
            _spec_text(spec_path, spec_keys, translation.notes), encoding="utf-8"
        )
        try:
            spec = load_spec(dest)
        except SpecError as exc:
            raise Refusal(f"the imported spec is not valid here: {exc}") from None

        report: dict[str, Any] = {
            "project": str(dest),
            "spec": str(dest / SPEC_FILENAME),
            "source": str(spec_path),
            "keys": translation.notes,
            "unknown_keys": translation.unknown,
            "adapter": adapter_report,
            "run": None,
        }
        if run is not None:
            report["run"] = _import_run(run, spec)
    except BaseException:
        for path in created:  # an import that fails leaves DEST as it found it
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise
    if report["run"] is not None:
        tags = [t for t in report["run"]["tags"] if t != report["run"]["best"]]
        report["next"] = [f"cd {dest} && capevolve gate {tag}" for tag in tags[:3]] + [
            f"cd {dest} && capevolve measure"
        ]
    else:
        report["next"] = [f"capevolve check {dest}", f"pytest --capevolve-run {dest}"]
    return report


def _read(run_dir: Path) -> CapEvolveRun:
    try:
        return read_run(run_dir)
    except RunDirError as exc:
        raise Refusal(str(exc)) from None


def adapter_class_of(path: Path) -> tuple[str, str | None]:
    """The adapter class in cap-evolve's ``adapters/adapter.py``, read without running it.

    cap-evolve's loader (``cap_evolve.check.load_adapter``) instantiates the module's name
    ``Adapter``: a file binding it is taken as is. A file without it could not run under
    cap-evolve either, but if exactly one class subclasses ``CapabilityAdapter`` or defines
    ``run_target``, that class is meant (returned with a note saying so); none or several is
    refused, since a guess would import cleanly and fail at the first check.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise Refusal(f"{path} does not parse as Python ({exc}); fix it, then import again") from None
    bound: set[str] = set()
    classes: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bound.add(node.name)
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            if "CapabilityAdapter" in bases or "run_target" in methods:
                classes.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if "Adapter" in bound:
        return "Adapter", None
    if len(classes) == 1:
        return classes[0], (
            f"{path.name} binds no name `Adapter` (cap-evolve's loader instantiates `Adapter`); "
            f"used {classes[0]}, its one class subclassing CapabilityAdapter or defining run_target"
        )
    found = f"classes {', '.join(classes)} all look like one" if classes else "no class looks like one"
    raise Refusal(
        f"{path}: no adapter class named `Adapter` (the name cap-evolve loads), and {found} "
        "(subclassing CapabilityAdapter or defining run_target); add `Adapter = YourClass` to it, "
        "then import again"
    )


def _copy_adapter(source: Path, dest: Path, adapter_class: str, note: str | None) -> dict[str, Any]:
    """Copy ``adapters/``; in its Python files, cap-evolve's contract types come from here."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    rewritten: list[str] = []
    by_hand: list[str] = []
    for path in sorted(dest.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for number, line in enumerate(lines, 1):
            where = f"{path.relative_to(dest.parent)}:{number}"
            match = _IMPORT.match(line.rstrip("\n"))
            names = {n.strip().split(" as ")[0] for n in match[2].strip("()").split(",")} if match else set()
            if match and names and names <= OUR_NAMES:
                lines[number - 1] = f"{match[1]}from pytest_capevolve import {match[2]}\n"
                rewritten.append(where)
            elif _OTHER.match(line):
                by_hand.append(
                    f"{where}: {line.strip()!r} has no counterpart here (pytest_capevolve exports "
                    f"{', '.join(sorted(OUR_NAMES))}); adapt it by hand"
                )
        path.write_text("".join(lines), encoding="utf-8")
    return {
        "file": "adapters/adapter.py",
        "class": adapter_class,
        "class_note": note,
        "rewritten_imports": rewritten,
        "by_hand": by_hand,
    }


def _spec_text(source: Path, keys: dict[str, Any], notes: dict[str, str]) -> str:
    head = [
        f"# Imported from cap-evolve's {source} by `capevolve import-cap-evolve`",
        f"# on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
    ]
    body = [
        yaml.safe_dump({key: keys[key]}, sort_keys=False, allow_unicode=True).rstrip("\n") for key in keys
    ]
    unused = [f"#   {key}: {note}" for key, note in notes.items() if key not in keys]
    if unused:
        unused.insert(0, "# cap-evolve keys not carried over:")
    return "\n".join(head + body + unused) + "\n"


def _import_run(run: CapEvolveRun, spec: Any) -> dict[str, Any]:
    """Write the cap-evolve run into a new run of the imported project, through the run dir."""
    with RunDir.project_lock(spec.project_dir):
        rundir = RunDir.resolve(spec.project_dir, new=True)
        try:
            return _fill_run(rundir, run, spec)
        except BaseException:
            rundir.discard_if_created()  # no half-imported run left behind
            raise


def _fill_run(rundir: RunDir, run: CapEvolveRun, spec: Any) -> dict[str, Any]:
    rundir.ensure_spec_lock(spec)
    rundir.ensure_splits(
        lambda: {**run.splits, "source": {"split_ids_file": SPLITS_FILE, "cap_evolve_run": str(run.root)}}
    )
    folders: dict[str, Path | None] = dict(run.snapshots)
    for rollout in run.rollouts:
        folders.setdefault(run.tag_for(rollout), run.snapshot_for(rollout))
    hashes: dict[str, str] = {}
    for tag, folder in sorted(folders.items()):
        if folder is None:
            continue
        try:
            hashes[tag] = rundir.snapshots.register_candidate(tag, folder)
        except CandidateError as exc:
            run.unreadable.append(f"{folder}: {exc}")
    skipped: dict[str, int] = {}
    counts: dict[str, int] = {}
    for rollout in run.rollouts:
        tag = run.tag_for(rollout)
        if tag not in hashes:
            skipped[rollout.tag] = skipped.get(rollout.tag, 0) + 1
            continue
        record = rollout.record(
            run_id=rundir.run_id,
            tag=tag,
            seed=run.split_seed + rollout.trial,
            candidate_hash=hashes[tag],
            threshold=spec.success_threshold,
        )
        rundir.rollouts.record_rollout(record)
        counts[f"{rollout.split}/{tag}"] = counts.get(f"{rollout.split}/{tag}", 0) + 1
    if run.best_id != SEED_TAG and run.best_id in hashes:
        # as replaying the log will read it: a best changed without a booked decision
        rundir.state.update_state(
            lambda state: state.update(best_id=run.best_id, iterations=state["iterations"] + 1, stall=0)
        )
        rundir.log.append_event(
            "best_changed", best_id=run.best_id, previous=SEED_TAG, basis="cap-evolve import"
        )
    rundir.log.append_event(
        "cap_evolve_imported",
        source=str(run.root),
        best_id=run.best_id,
        rollouts=sum(counts.values()),
        skipped=skipped,
        cap_evolve_spent=run.state.get("spent"),
        cap_evolve_budget=run.state.get("budget"),
    )
    seal = _seal(rundir, run, spec) if run.test_used else "sealed: cap-evolve never scored the test split"
    return {
        "source": str(run.root),
        "run_id": rundir.run_id,
        "run_dir": str(rundir.root),
        "best": run.best_id,
        "tags": sorted(hashes),
        "rollouts": counts,
        "skipped": {
            tag: f"{n} rollout(s): cap-evolve kept no snapshot candidates/{tag}/, so which bytes "
            "they measured is unknown"
            for tag, n in skipped.items()
        },
        "unreadable": run.unreadable,
        "test": seal,
    }


def _seal(rundir: RunDir, run: CapEvolveRun, spec: Any) -> str:
    """cap-evolve scored its test split once: burn our seal with that score, so nothing here
    scores it a second time (a second look at held-out data is not held out)."""
    from ..._show.measure import paired_summary
    from ..._show.report import summarize_arm
    from ..._store.evidence import index_records, reward_matrix
    from ..._store.seal import Seal

    seal = Seal(rundir)
    seal.claim()
    try:
        by_tag = index_records(seal.test_rollouts())
        test_ids = run.splits["test"]
        best = run.best_id

        def arm(tag: str) -> dict[str, Any]:
            row = summarize_arm(
                by_tag.get(tag, {}),
                tag=tag,
                split="test",
                task_ids=test_ids,
                num_trials=spec.num_trials,
                paid=0,
                reused=len(by_tag.get(tag, {})),
            )
            return {**row.to_dict(), "content_hash": rundir.snapshots.candidate_hash(tag)}

        seed_row = arm(SEED_TAG) if best != SEED_TAG and SEED_TAG in by_tag else None
        delta = None
        if seed_row is not None:
            delta = paired_summary(
                reward_matrix(by_tag[best], test_ids, spec.num_trials),
                reward_matrix(by_tag[SEED_TAG], test_ids, spec.num_trials),
                seed=spec.base_seed,
            )
        result = {
            "run_id": rundir.run_id,
            "split": "test",
            "scored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tasks": len(test_ids),
            "trials": spec.num_trials,
            "best": arm(best),
            "seed": seed_row,
            "delta_vs_seed": delta,
            "null_result": best == SEED_TAG,
            "rollouts": "rollouts/test/*__<tag>__t*.json",
            "infra_errors": sum(r.infra_error is not None for a in by_tag.values() for r in a.values()),
            "imported_from": str(run.root),
        }
        seal.burn(result)
    finally:
        seal.release()
    mean = result["best"]["mean"]
    shown = "no valid test rollout was kept" if mean is None else f"best {best!r} test mean {mean:.4f}"
    return f"burned by cap-evolve's finalize: {shown} (seal.json)"


def render(report: dict[str, Any]) -> list[str]:
    """The human form of an import's report (``capevolve import-cap-evolve`` without ``--json``)."""
    lines = [f"imported {report['source']} → {report['spec']}"]
    lines += [f"  {key}: {note}" for key, note in report["keys"].items()]
    adapter = report["adapter"]
    rewritten = len(adapter["rewritten_imports"])
    lines.append(f"adapter: {adapter['file']}:{adapter['class']} ({rewritten} import(s) rewritten)")
    if adapter["class_note"]:
        lines.append(f"  note: {adapter['class_note']}")
    lines += [f"  by hand: {item}" for item in adapter["by_hand"]]
    run = report["run"]
    if run is not None:
        total = sum(run["rollouts"].values())
        lines.append(f"run {run['run_id']}: {total} rollouts, best {run['best']!r}; test {run['test']}")
        lines += [f"  skipped {tag}: {why}" for tag, why in run["skipped"].items()]
        lines += [f"  unreadable: {item}" for item in run["unreadable"]]
    lines += [f"next: {command}" for command in report["next"]]
    return lines
