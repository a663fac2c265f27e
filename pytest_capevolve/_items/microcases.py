"""Microcase collectors and items: a YAML file under a project's ``microcases/`` becomes one
item per microcase and candidate, outside any evaluation session.

Each item runs its check (:func:`.._engine.checks.run`) on ``--capevolve-candidate``, else the
newest run's best, else the seed; a microcase using a test task is refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .._engine.checks import ProjectEnv
from .._engine.checks import run as run_microcase
from .._project.adapter import AdapterError
from .._project.candidate import SEED_TAG
from .._project.microcase import Microcase, MicrocaseError, load_file, refuse_test_tasks
from .._project.spec import SpecError
from .._project.way_on import no_such_candidate, pasteable
from .._store.rundir import RunDir, RunDirError


class MicrocaseFailed(Exception):
    """The candidate did not do what the microcase expects."""


@dataclass
class MicrocaseProject:
    """What a project's microcase items share, worked out once per process."""

    env: ProjectEnv
    default_candidate: tuple[str, Path]  # the newest run's best (its snapshot), else the seed
    test_ids: list[str]  # the newest run's frozen test split: microcases may not use it


MICRO_PROJECTS_KEY = pytest.StashKey[dict[Path, MicrocaseProject]]()


def microcase_project(config: pytest.Config, project_dir: Path) -> MicrocaseProject:
    projects = config.stash.setdefault(MICRO_PROJECTS_KEY, {})
    if project_dir not in projects:
        env = ProjectEnv.load(project_dir)
        config.add_cleanup(env.close)  # the `adapter` checks' sandbox children end with the session
        spec = env.spec
        try:
            rundir = RunDir.resolve(spec.project_dir, create=False)
        except RunDirError:
            projects[project_dir] = MicrocaseProject(env, (SEED_TAG, spec.capability_path), [])
            return projects[project_dir]
        best = rundir.state.best()
        snapshot = rundir.snapshots.snapshot_dir(best)
        default = (
            (best, snapshot) if best != SEED_TAG and snapshot.is_dir() else (SEED_TAG, spec.capability_path)
        )
        test_ids = list((rundir.splits() or {}).get("test", []))
        projects[project_dir] = MicrocaseProject(env, default, test_ids)
    return projects[project_dir]


def microcase_candidates(config: pytest.Config, project: MicrocaseProject) -> list[tuple[str, Path]]:
    """--capevolve-candidate folders (tagged as in an evaluation), else the default."""
    dirs = [Path(d).resolve() for d in config.option.capevolve_candidate]
    if not dirs:
        return [project.default_candidate]
    spec = project.env.spec
    tags = list(config.option.capevolve_tag)
    chosen = []
    for i, path in enumerate(dirs):
        if not path.is_dir():
            raise MicrocaseError(no_such_candidate(path))
        fallback = SEED_TAG if path == spec.capability_path else path.name
        chosen.append((tags[i] if i < len(tags) else fallback, path))
    return chosen


class MicrocaseFile(pytest.File):
    """A YAML file under a project's ``microcases/``: one item per microcase and candidate."""

    def collect(self) -> Iterator[pytest.Item]:
        try:
            cases = load_file(self.path)
            project = microcase_project(self.config, cases[0].project)
            candidates = microcase_candidates(self.config, project)
            refuse_test_tasks(cases, project.test_ids)
        except (MicrocaseError, SpecError) as exc:
            raise self.CollectError(str(exc)) from None
        for case in cases:
            for tag, path in candidates:
                yield MicrocaseItem.from_parent(
                    self, name=f"{case.id}[{tag}]", case=case, tag=tag, candidate=path
                )


class MicrocaseItem(pytest.Item):
    def __init__(self, *, case: Microcase, tag: str, candidate: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.tag = tag
        self.candidate = candidate

    def runtest(self) -> None:
        env = microcase_project(self.config, self.case.project).env
        outcome = run_microcase(self.case, self.candidate, env)
        ran = f" (the call ran {outcome.unconfined})" if outcome.unconfined else ""
        if outcome.unconfined:
            self.user_properties.append(("confinement", outcome.unconfined))
        if not outcome.ok:
            raise MicrocaseFailed(f"expected {outcome.expected}, got {outcome.got}{ran}")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        case = self.case
        if isinstance(excinfo.value, (MicrocaseFailed, MicrocaseError, AdapterError)):
            first = case.description.splitlines()[0] if case.description else ""
            return (
                f"microcase {case.id} (cluster {case.cluster}) on candidate {self.tag!r}: "
                f"{excinfo.value}\n  why it exists: {first}"
            ) + (self._seed_fails(case) if self.tag == SEED_TAG else "")
        return super().repr_failure(excinfo, style=style)

    @staticmethod
    def _seed_fails(case: Microcase) -> str:
        """A microcase is a guard of what the seed already does right, never a goal: one the seed
        fails would reject every candidate that keeps the seed's behaviour."""
        check = pasteable("`capevolve check PROJECT`", case.project)
        return (
            "\n  the seed fails it: a microcase guards what the seed already does right, so every gate "
            f"would reject a candidate that keeps this; mend it before the first session ({check} says so)"
        )

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # a line, as for a rollout item: a skip mark's report is placed there
        return self.path, 0, f"microcase {self.case.id} [{self.case.cluster}] on {self.tag}"
