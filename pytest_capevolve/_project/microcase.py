"""Microcases: cheap deterministic checks of a candidate, one failure cluster each.

A microcase file is YAML under the project's ``microcases/`` folder: one mapping or a list, each
with ``id``, ``cluster``, ``description``, optional ``origin`` and one check: ``text``, ``call``,
``score`` or ``adapter`` (docs/how-to/microcases.md). Validation raises :class:`MicrocaseError`
naming the file, microcase and field; :mod:`.._engine.checks` runs them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exitcodes import CapevolveError
from .adapter import AdapterError, check_reward
from .spec import SPEC_FILENAME, unknown_key
from .yamlfile import YamlError, read_yaml

MICROCASES_DIR = "microcases"
CHECK_KINDS = ("text", "call", "score", "adapter")
TOP_KEYS = ("id", "cluster", "description", "origin", *CHECK_KINDS)
PLACEHOLDER = "FILL_IN"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
EXPECTATIONS = ("equals", "contains", "matches", "raises", "json_subset")
CALL_TIMEOUT_S = 10.0


class MicrocaseError(CapevolveError):
    """A microcase file is malformed; the message names the file, the microcase and the fix."""


@dataclass(frozen=True)
class Microcase:
    id: str
    cluster: str
    description: str
    origin: str | None
    kind: str
    check: dict[str, Any]
    file: Path
    project: Path


# -- finding and loading ----------------------------------------------------------------------


def is_microcase_file(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and MICROCASES_DIR in path.parts[:-1]


def find_project(path: Path) -> Path:
    """The project a microcase file belongs to: the nearest folder above its real path that
    holds ``capevolve.yaml`` (so a symlinked ``microcases/`` still finds its project)."""
    for folder in path.resolve().parents:
        if (folder / SPEC_FILENAME).is_file():
            return folder
    raise MicrocaseError(
        f"{path}: no {SPEC_FILENAME} in any folder above it; a microcase file lives in its "
        f"project's {MICROCASES_DIR}/ folder"
    )


def project_files(project_dir: Path) -> list[Path]:
    folder = project_dir / MICROCASES_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def load_project(project_dir: Path) -> list[Microcase]:
    """Every microcase of a project, ids unique across its files."""
    cases: list[Microcase] = []
    seen: dict[str, Path] = {}
    for path in project_files(project_dir):
        for case in load_file(path, project_dir):
            if case.id in seen:
                raise MicrocaseError(f"{path}: microcase id {case.id!r} is already used in {seen[case.id]}")
            seen[case.id] = path
            cases.append(case)
    return cases


def load_file(path: Path, project_dir: Path | None = None) -> list[Microcase]:
    try:
        raw = read_yaml(path)
    except YamlError as exc:
        raise MicrocaseError(str(exc)) from None
    entries = raw if isinstance(raw, list) else [raw]
    if raw is None or not entries or not all(isinstance(e, dict) for e in entries):
        raise MicrocaseError(f"{path}: a microcase file holds one microcase mapping or a list of them")
    project = project_dir or find_project(path)
    cases = [_parse(entry, path, project, i) for i, entry in enumerate(entries)]
    ids = [c.id for c in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise MicrocaseError(f"{path}: microcase id {duplicates[0]!r} appears twice in this file")
    return cases


def _parse(entry: dict[str, Any], path: Path, project: Path, index: int) -> Microcase:
    name = entry.get("id") if isinstance(entry.get("id"), str) else f"#{index + 1}"

    def fail(message: str) -> MicrocaseError:
        return MicrocaseError(f"{path}: microcase {name}: {message}")

    unknown = [k for k in entry if k not in TOP_KEYS]
    if unknown:
        raise fail(unknown_key(unknown[0], TOP_KEYS))
    for key in ("id", "cluster", "description"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise fail(f"{key!r} is required: a non-empty string")
    if not ID_RE.match(entry["id"]):
        raise fail("'id' must be 1-100 letters, digits, '.', '-' or '_', starting with a letter or digit")
    origin = entry.get("origin")
    if origin is not None and not isinstance(origin, str):
        raise fail("'origin' must be a string (the task or rollout it came from)")
    kinds = [k for k in CHECK_KINDS if k in entry]
    if len(kinds) != 1:
        found = ", ".join(kinds) or "none"
        raise fail(f"needs exactly one check, one of {', '.join(CHECK_KINDS)} (found: {found})")
    kind = kinds[0]
    check = entry[kind]
    if not isinstance(check, dict):
        raise fail(f"{kind!r} must be a mapping of its options")
    unfilled = _placeholder_path(check, kind)
    if unfilled:
        raise fail(f"{unfilled} is still {PLACEHOLDER}: fill in the expectation before running it")
    try:
        check = VALIDATORS[kind](dict(check))
    except ValueError as exc:
        raise fail(f"{kind}: {exc}") from None
    return Microcase(
        id=entry["id"],
        cluster=entry["cluster"],
        description=entry["description"].strip(),
        origin=origin,
        kind=kind,
        check=check,
        file=path,
        project=project,
    )


def _placeholder_path(value: Any, where: str) -> str | None:
    if value == PLACEHOLDER:
        return where
    if isinstance(value, dict):
        inner = [(f"{where}.{k}", v) for k, v in value.items()]
    else:
        inner = [(f"{where}[{i}]", v) for i, v in enumerate(value)] if isinstance(value, list) else []
    return next((found for path, v in inner if (found := _placeholder_path(v, path))), None)


def task_of(case: Microcase) -> str | None:
    """The task a score/adapter microcase reads, if any (for the seal check)."""
    if case.kind == "adapter" or (case.kind == "score" and "task" in case.check):
        return str(case.check["task"])
    if case.kind == "score":
        try:
            record = json.loads((case.file.parent / case.check["rollout"]).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None  # reported when the microcase runs
        return str(record.get("task_id"))
    return None


def refuse_test_tasks(cases: Iterable[Microcase], test_ids: Iterable[str]) -> None:
    """A microcase on a test task would let the search see held-out data: refuse it."""
    sealed = set(test_ids)
    for case in cases:
        task = task_of(case)
        if task is not None and task in sealed:
            raise MicrocaseError(
                f"{case.file}: microcase {case.id} uses task {task!r}, which is in the sealed test "
                "split; a microcase steers the search, so it may only use train or val tasks"
            )


# -- per-kind validation (ValueError says what is wrong, relative to the check) ----------------


def _only(check: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in check:
        if key not in allowed:
            raise ValueError(unknown_key(key, allowed))


def _relative_file(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} must be a path relative to the candidate folder")
    parts = Path(value).parts
    if Path(value).is_absolute() or ".." in parts:
        raise ValueError(f"{key!r} = {value!r} leaves the candidate folder; give a path inside it")
    return value


def _strings(value: Any, key: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{key!r} must be a string or a list of strings")
    return values


def _regex(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a regular expression (a string)")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{key!r} = {value!r} is not a valid regular expression: {exc}") from None
    return value


def _with_reward_range(check: dict[str, Any]) -> dict[str, Any]:
    """``check`` with its required ``reward`` read as (min, max)."""
    if "reward" not in check:
        raise ValueError("'reward' is required: a number or {min, max}")
    value = check["reward"]
    if isinstance(value, dict):
        unknown = [k for k in value if k not in ("min", "max")]
        if unknown:
            raise ValueError(unknown_key(unknown[0], ("min", "max")))
        low, high = value.get("min", 0.0), value.get("max", 1.0)
    else:
        low = high = value
    try:
        low, high = check_reward(low, "reward min"), check_reward(high, "reward max")
    except AdapterError:
        raise ValueError(
            f"'reward' must be a number in [0, 1] or {{min: a, max: b}} within [0, 1], got {value!r}"
        ) from None
    if low > high:
        raise ValueError(f"'reward' min {low} is above max {high}")
    return {**check, "reward": (low, high)}


def _text(check: dict[str, Any]) -> dict[str, Any]:
    _only(check, ("file", "contains", "not_contains", "matches", "not_matches", "max_bytes"))
    check["file"] = _relative_file(check.get("file"), "file")
    for key in ("contains", "not_contains"):
        if key in check:
            check[key] = _strings(check[key], key)
    for key in ("matches", "not_matches"):
        if key in check:
            check[key] = _regex(check[key], key)
    if "max_bytes" in check:
        size = check["max_bytes"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError("'max_bytes' must be a whole number ≥ 0")
    if len(check) == 1:
        raise ValueError("say what to check: contains, not_contains, matches, not_matches or max_bytes")
    return check


def _call(check: dict[str, Any]) -> dict[str, Any]:
    _only(check, ("function", "args", "kwargs", "timeout_s", "expect"))
    function = check.get("function")
    file_part, sep, name = str(function or "").partition(":")
    if not sep or not file_part.endswith(".py") or not name.isidentifier():
        raise ValueError(f"'function' must be 'path/to/file.py:name' inside the candidate, got {function!r}")
    _relative_file(file_part, "function")
    check.setdefault("args", [])
    check.setdefault("kwargs", {})
    if not isinstance(check["args"], list):
        raise ValueError("'args' must be a list")
    if not isinstance(check["kwargs"], dict):
        raise ValueError("'kwargs' must be a mapping")
    timeout = check.setdefault("timeout_s", CALL_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"'timeout_s' must be a number of seconds > 0, got {timeout!r}")
    expect = check.get("expect")
    if not isinstance(expect, dict) or len(expect) != 1 or next(iter(expect)) not in EXPECTATIONS:
        raise ValueError(f"'expect' must hold exactly one of {', '.join(EXPECTATIONS)}, got {expect!r}")
    if "matches" in expect:
        _regex(expect["matches"], "expect.matches")
    if "raises" in expect and not (isinstance(expect["raises"], str) and expect["raises"].isidentifier()):
        raise ValueError(f"'expect.raises' must name an exception class, got {expect['raises']!r}")
    return check


def _score(check: dict[str, Any]) -> dict[str, Any]:
    _only(check, ("task", "output", "rollout", "reward"))
    if ("output" in check) == ("rollout" in check):
        raise ValueError("give exactly one of 'output' (a literal) or 'rollout' (a stored rollout file)")
    if "rollout" in check and not isinstance(check["rollout"], str):
        raise ValueError("'rollout' must be a path to a rollout JSON file, relative to the microcase file")
    if "output" in check and not isinstance(check.get("task"), str):
        raise ValueError("'task' (the task id the output answers) is required with 'output'")
    return _with_reward_range(check)


def _adapter(check: dict[str, Any]) -> dict[str, Any]:
    _only(check, ("task", "seed", "reward"))
    if not isinstance(check.get("task"), str):
        raise ValueError("'task' is required: the id of the task to run")
    seed = check.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"'seed' must be a whole number, got {seed!r}")
    return _with_reward_range(check)


VALIDATORS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "text": _text,
    "call": _call,
    "score": _score,
    "adapter": _adapter,
}
