"""``.ci/constraints-oldest.txt`` pins every dependency pyproject.toml declares, each at a version
its declared range admits and no newer than the next minor release after the minimum — so
``.ci/compat oldest`` really runs the suite at the floor the package promises."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [*project["dependencies"], *project["optional-dependencies"]["hypothesis"]]
    return {Requirement(text).name.lower(): Requirement(text) for text in names}


def _pinned() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / ".ci" / "constraints-oldest.txt").read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            name, _, version = text.partition("==")
            pins[name.strip().lower()] = Version(version.strip())
    return pins


def test_every_declared_dependency_is_pinned_at_its_floor() -> None:
    declared, pinned = _declared(), _pinned()
    assert sorted(pinned) == sorted(declared)
    for name, requirement in declared.items():
        version = pinned[name]
        assert requirement.specifier.contains(version), (name, version, requirement)
        floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
        assert floors, f"{name}: declare a minimum (>=) so there is a floor to test"
        floor = floors[0]
        # the floor itself, or a patch release of it (a yanked .0 is never what a resolver picks)
        assert version.release[:2] == (floor.release + (0,))[:2], (name, version, floor)
