"""``capevolve merge A B [C…] --tag AB [--integrate]``: one candidate from siblings that fixed
different things.

A new work copy: the common parent plus each candidate's changes, file by file (a file both
changed goes through ``git merge-file``); overlapping changes are refused, naming the files, and
nothing is written. A clean merge is not evidence: it is gated on full val like any other.
``--integrate`` gates after each addition and keeps only those that clear the gate."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from .._policy import guards
from .._policy.booking.commit import CommitRefused, book, parent_of
from .._policy.booking.commit_checks import source_folder
from .._project.candidate import SEED_TAG, check_tag, iter_files, read_plain
from .._project.spec import Spec
from .._store.rundir import RunDir
from ..exitcodes import Refusal
from .handover import new_work_copy
from .hill_climb_record import booked_decision
from .launch import gate_flags, run_logged, session_command
from .task_eval import candidate_folder

Tree = dict[str, bytes]  # relative posix path → bytes
MergeFile = Callable[[bytes, bytes, bytes], "bytes | None"]  # (base, current, other) → merged or None
INCOMPLETE = 3  # a gate session gave no verdict (as hill-climb's exit 3): what it paid is kept


def read_tree(folder: Path) -> Tree:
    """A candidate folder's files as bytes (handover files and caches left out, as in snapshots)."""
    root = folder.resolve()
    tree = {}
    for path in iter_files(root):
        data = read_plain(path)  # never through a link made after the listing
        if data is None:
            raise Refusal(
                f"{path}: no longer a plain file as it was read; merge again once nothing changes it"
            )
        tree[path.relative_to(root).as_posix()] = data
    return tree


def three_way(base: Tree, current: Tree, other: Tree, merge_file: MergeFile) -> tuple[Tree, list[str]]:
    """Apply ``other``'s changes against ``base`` onto ``current``, file by file: the merged
    tree, and the files that conflict (changed apart, deleted against a change, added apart)."""
    merged: Tree = {}
    conflicts: list[str] = []
    for path in sorted(set(base) | set(current) | set(other)):
        b, c, o = base.get(path), current.get(path), other.get(path)
        if o == b or c == o:
            result = c
        elif c == b:
            result = o
        elif b is None or c is None or o is None:
            conflicts.append(path)
            continue
        else:
            result = merge_file(b, c, o)
            if result is None:
                conflicts.append(path)
                continue
        if result is not None:
            merged[path] = result
    return merged, conflicts


class GitMergeFile:
    """``git merge-file`` through gitpython in a temporary repository (a context manager)."""

    def __enter__(self) -> GitMergeFile:
        import git

        self._tmp = tempfile.TemporaryDirectory(prefix="capevolve-merge-")
        self.root = Path(self._tmp.name)
        self.repo = git.Repo.init(self.root)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.repo.close()
        self._tmp.cleanup()

    def __call__(self, base: bytes, current: bytes, other: bytes) -> bytes | None:
        names = ("current", "base", "other")
        for name, data in zip(names, (current, base, other), strict=True):
            (self.root / name).write_bytes(data)
        # read from the file git merges into, not `-p`'s stdout, whose last newline gitpython
        # strips (the keyword that keeps it is 3.1.28+)
        status, _out, _err = self.repo.git.merge_file(
            *names, with_extended_output=True, with_exceptions=False
        )
        # 0: clean; > 0: the number of conflicts; 255 / < 0: an error (binary files)
        return (self.root / "current").read_bytes() if status == 0 else None


def ancestry(rundir: RunDir, tag: str) -> list[str]:
    """``tag``, its parent, its parent's parent … down to the seed."""
    chain = [tag]
    while chain[-1] != SEED_TAG and len(chain) <= 10_000:
        parent = parent_of(rundir, chain[-1])
        if parent in chain:
            break
        chain.append(parent)
    return chain


def common_parent(rundir: RunDir, tags: Sequence[str]) -> str:
    """The nearest ancestor every one of ``tags`` descends from (the seed at worst)."""
    lines = [ancestry(rundir, tag) for tag in tags]
    shared = set(lines[0]).intersection(*map(set, lines[1:]))
    return next((tag for tag in lines[0] if tag in shared), SEED_TAG)


def _check_inputs(rundir: RunDir, tags: Sequence[str], tag: str) -> None:
    if len(tags) < 2:
        raise Refusal("a merge needs at least two candidates: capevolve merge A B [C …] --tag AB")
    if len(set(tags)) != len(tags):
        raise Refusal(f"a candidate is named twice: {' '.join(tags)}")
    for name in [*tags, tag]:
        check_tag(name)


def _merge_all(base: Tree, trees: dict[str, Tree], order: Sequence[str], merge_file: MergeFile) -> Tree:
    """The base plus each candidate's changes, in order; a conflict refuses the whole merge."""
    merged = dict(base)
    for name in order:
        merged, conflicts = three_way(base, merged, trees[name], merge_file)
        if conflicts:
            earlier = ", ".join(order[: order.index(name)])
            raise Refusal(
                f"{name}'s changes overlap {earlier}'s and do not merge cleanly in "
                f"{', '.join(conflicts)}; nothing was written (merge fewer candidates, or edit one "
                "so they touch different lines)"
            )
    return merged


class IntegrationStep(TypedDict, total=False):
    """One addition of ``merge --integrate`` (a row of its ``steps``)."""

    candidate: str
    tag: str | None
    files: list[str]
    outcome: str
    reason: str | None
    booking_refused: str
    booked: str | None
    against: str | None
    decision: str | None
    basis: str | None
    delta_mean: float | None
    p_value: float | None


def _changes(base: Tree, tree: Tree) -> list[str]:
    return sorted(p for p in set(base) | set(tree) if base.get(p) != tree.get(p))


def merge(
    spec: Spec, rundir: RunDir, tags: Sequence[str], tag: str, onto: str | None = None
) -> dict[str, Any]:
    """Build ``work/<tag>/``: ``onto`` (default the common parent) plus each candidate's changes."""
    _check_inputs(rundir, tags, tag)
    parent = onto or common_parent(rundir, tags)
    base = read_tree(candidate_folder(spec, rundir, parent))
    trees = {name: read_tree(candidate_folder(spec, rundir, name)) for name in tags}
    with GitMergeFile() as merge_file:
        merged = _merge_all(base, trees, tags, merge_file)
    same = [name for name in tags if trees[name] == merged]
    created = new_work_copy(spec, rundir, tag, parent, files=merged, merged_from=list(tags))
    return {
        **created,
        # byte-identical to a parent: gating it measures nothing but noise
        **({"note": f"byte-identical to {same[0]!r}: the others add nothing to it"} if same else {}),
        "changes": {name: _changes(base, trees[name]) for name in tags},
        "changed_files": _changes(base, merged),
        "next": [
            f"pytest --capevolve-run {spec.project_dir} --capevolve-candidate {created['path']} "
            "--capevolve-gate"
        ],
    }


def integrate(
    spec: Spec,
    rundir: RunDir,
    tags: Sequence[str],
    tag: str,
    *,
    onto: str | None = None,
    workers: int = 0,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Add the candidates' changes one at a time, each addition gated (``<tag>-<i>``) against
    the current best and booked; keep only the additions the gate accepts."""
    _check_inputs(rundir, tags, tag)
    guards.refuse_finalized(rundir, guards.Checkpoint.MERGE)
    parent = onto or common_parent(rundir, tags)
    base = read_tree(candidate_folder(spec, rundir, parent))
    trees = {name: read_tree(candidate_folder(spec, rundir, name)) for name in tags}
    step_tags = [check_tag(f"{tag}-{i}") for i in range(1, len(tags) + 1)]
    taken = set(rundir.snapshots.known_tags()) | set(rundir.verdicts.verdicts())
    clash = [t for t in step_tags if t in taken or rundir.work_dir(t).exists()]
    if clash:
        raise Refusal(f"tag(s) {', '.join(clash)} already exist in run {rundir.run_id}; choose another --tag")
    kept_tree, kept = dict(base), []
    steps: list[IntegrationStep] = []
    answer: dict[str, Any] = {"tag": tag, "parent": parent, "candidates": list(tags), "steps": steps}
    with GitMergeFile() as merge_file:
        _merge_all(base, trees, tags, merge_file)  # refuse overlapping changes before paying anything
        for name, step in zip(tags, step_tags, strict=True):
            tree, conflicts = three_way(base, kept_tree, trees[name], merge_file)
            # ``tag`` is set only for a step that became a candidate (a work copy, gated)
            row: IntegrationStep = {"candidate": name, "tag": None, "files": _changes(kept_tree, tree)}
            steps.append(row)
            best = rundir.state.best()
            if conflicts:
                row.update(
                    {"outcome": "conflict", "reason": f"does not merge cleanly in {', '.join(conflicts)}"}
                )
            elif tree == kept_tree:
                row.update({"outcome": "no_change", "reason": "adds nothing to what is kept"})
            elif tree == read_tree(candidate_folder(spec, rundir, best)):
                kept_tree = tree
                kept.append(name)
                row.update(
                    {"outcome": "kept", "reason": f"byte-identical to the best {best!r}: nothing to gate"}
                )
            else:
                # the candidate's own bytes, evaluated and undecided: gated as itself (a step tag
                # would be refused as a repeat of its bytes, and the addition dropped ungated)
                own = tree == trees[name] and _undecided(rundir, name)
                step = name if own else step
                row["tag"] = step
                if not own:
                    new_work_copy(spec, rundir, step, parent, files=tree, merged_from=[*kept, name])
                folder = source_folder(rundir, step) if own else rundir.work_dir(step)
                verdict = _gate(spec, rundir, step, folder, rundir.merge_dir(tag), workers, log)
                if verdict is None:
                    row["outcome"] = "incomplete"
                    answer.update(
                        exit_code=INCOMPLETE,
                        stopped=f"the gate session of {step} gave no verdict (see "
                        f"{rundir.merge_dir(tag) / (step + '.log')}); what it paid is kept",
                    )
                    break
                decision, basis = booked_decision(verdict)
                note = f"merge --integrate: + {name}: " + str(verdict.get("reason", ""))
                try:
                    book(spec, rundir, step, decision, basis=basis, note=note)
                except CommitRefused as exc:  # e.g. the best moved meanwhile: what was booked decides
                    row["booking_refused"] = str(exc)
                booked = next((e for e in rundir.decisions() if e["tag"] == step), None)
                accepted = booked is not None and booked["decision"] == "accept"
                if accepted:
                    kept_tree = tree
                    kept.append(name)
                row.update(
                    {
                        "outcome": "kept" if accepted else "dropped",
                        "booked": None if booked is None else booked["decision"],
                        "against": verdict.get("against"),
                        "decision": verdict.get("decision"),
                        "basis": verdict.get("basis"),
                        "delta_mean": verdict.get("delta_mean"),
                        "p_value": verdict.get("p_value"),
                        "reason": verdict.get("reason"),
                    }
                )
            log(f"merge --integrate + {name}: {row['outcome']} — {row.get('reason', '')}")
    answer.update(
        kept=kept,
        dropped=[r["candidate"] for r in steps if r["outcome"] in ("dropped", "conflict")],
        result=next((r["tag"] for r in reversed(steps) if r.get("decision") == "accept"), None),
        best=rundir.state.best(),
    )
    return answer


def _undecided(rundir: RunDir, tag: str) -> bool:
    """Whether the run evaluated ``tag`` (its snapshot) and no decision was booked on it."""
    decided = {e["tag"] for e in rundir.decisions()}
    return rundir.snapshots.candidate_hash(tag) is not None and tag not in decided


def _gate(
    spec: Spec,
    rundir: RunDir,
    step: str,
    candidate: Path,
    logs: Path,
    workers: int,
    log: Callable[[str], None],
) -> dict[str, Any] | None:
    """One gate session on the step's candidate folder, as a child process (as hill-climb runs one)."""
    argv = session_command(spec.path, run_id=rundir.run_id, workers=workers)
    argv += gate_flags(candidate, step)
    log(f"{step}: gate session (against the best {rundir.state.best()!r})")
    run_logged(argv, spec.project_dir, logs / f"{step}.log")
    return rundir.verdicts.verdict(step)


def render(answer: dict[str, Any]) -> list[str]:
    if "steps" not in answer:
        lines = [f"merged {' + '.join(answer['merged_from'])} onto {answer['parent']!r} → {answer['path']}"]
        lines += [f"  {name}: {', '.join(files) or 'no change'}" for name, files in answer["changes"].items()]
        lines += [f"note: {answer['note']}"] if answer.get("note") else []
        lines += ["gate it like any candidate:", *(f"  {c}" for c in answer["next"])]
        return lines
    lines = [f"merge --integrate onto {answer['parent']!r}: {' + '.join(answer['candidates'])}"]
    for row in answer["steps"]:
        numbers = (
            "" if row.get("delta_mean") is None else f" (Δ̄ {row['delta_mean']:+.4f}, p {row['p_value']:.4g})"
        )
        lines.append(f"  + {row['candidate']:<16} {row['tag'] or '(no gate)':<16} {row['outcome']}{numbers}")
    lines.append(f"kept: {', '.join(answer['kept']) or 'none'}; best {answer['best']!r}")
    if answer.get("stopped"):
        lines.append(f"stopped: {answer['stopped']}")
    return lines
