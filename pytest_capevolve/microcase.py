"""Microcases: cheap deterministic checks of a candidate, one failure cluster each.

A microcase file is YAML under a project's ``microcases/`` folder (the project is the nearest
folder above the file's real path holding ``capevolve.yaml``): one microcase mapping, or a
list of them. Each has ``id``, ``cluster``, ``description``, optional ``origin`` and exactly
one check:

- ``text``: a file of the candidate must / must not contain a string, match a regex, or stay
  under a size;
- ``call``: call a function of the candidate in a subprocess with a timeout and compare the
  result (equals, contains, matches, raises, json_subset);
- ``score``: score a literal output or a stored rollout with the *project's* scorer;
- ``adapter``: run the adapter once on a task with a fixed seed against the candidate.

Validation raises :class:`MicrocaseError` naming the file, the microcase and the field.
Checks run wherever they are called: as pytest items (any process, xdist workers included)
or on the controller before a gate pays for rollouts.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .adapter import AdapterError, AdapterRunner, Rollout, Task, check_reward, load_adapter, load_tasks
from .spec import SPEC_FILENAME, Spec, SpecError, load_spec

MICROCASES_DIR = "microcases"
CHECK_KINDS = ("text", "call", "score", "adapter")
TOP_KEYS = ("id", "cluster", "description", "origin", *CHECK_KINDS)
PLACEHOLDER = "FILL_IN"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
EXPECTATIONS = ("equals", "contains", "matches", "raises", "json_subset")
CALL_TIMEOUT_S = 10.0


class MicrocaseError(Exception):
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


@dataclass(frozen=True)
class Outcome:
    ok: bool
    expected: str
    got: str


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
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise MicrocaseError(
            f"{path}{where}: malformed YAML: {getattr(exc, 'problem', None) or exc}"
        ) from None
    entries = raw if isinstance(raw, list) else [raw]
    if raw is None or not all(isinstance(e, dict) for e in entries):
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
        raise fail(_unknown_key(unknown[0], TOP_KEYS))
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


def _unknown_key(key: Any, valid: Iterable[str]) -> str:
    near = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key {key!r}{hint}; valid keys: {', '.join(valid)}"


def _placeholder_path(value: Any, where: str) -> str | None:
    if value == PLACEHOLDER:
        return where
    if isinstance(value, dict):
        for k, v in value.items():
            found = _placeholder_path(v, f"{where}.{k}")
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _placeholder_path(v, f"{where}[{i}]")
            if found:
                return found
    return None


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
            raise ValueError(_unknown_key(key, allowed))


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


def _reward_range(value: Any) -> tuple[float, float]:
    if isinstance(value, dict):
        unknown = [k for k in value if k not in ("min", "max")]
        if unknown:
            raise ValueError(_unknown_key(unknown[0], ("min", "max")))
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
    return (low, high)


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
    if "reward" not in check:
        raise ValueError("'reward' is required: a number or {min, max}")
    check["reward"] = _reward_range(check["reward"])
    return check


def _adapter(check: dict[str, Any]) -> dict[str, Any]:
    _only(check, ("task", "seed", "reward"))
    if not isinstance(check.get("task"), str):
        raise ValueError("'task' is required: the id of the task to run")
    seed = check.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"'seed' must be a whole number, got {seed!r}")
    if "reward" not in check:
        raise ValueError("'reward' is required: a number or {min, max}")
    check["reward"] = _reward_range(check["reward"])
    return check


VALIDATORS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "text": _text,
    "call": _call,
    "score": _score,
    "adapter": _adapter,
}


# -- running ----------------------------------------------------------------------------------


@dataclass
class ProjectEnv:
    """A project's spec and, loaded on first need, its adapter and task pool."""

    spec: Spec
    _runner: AdapterRunner | None = None
    _pool: dict[str, Task] = field(default_factory=dict)

    @classmethod
    def load(cls, project_dir: Path) -> ProjectEnv:
        try:
            return cls(load_spec(project_dir))
        except SpecError as exc:
            raise MicrocaseError(str(exc)) from None

    def runner(self) -> AdapterRunner:
        if self._runner is None:
            adapter = load_adapter(self.spec.adapter, self.spec.project_dir)
            self._pool = load_tasks(adapter, self.spec.adapter)
            self._runner = AdapterRunner(adapter)
        return self._runner

    def task(self, task_id: str) -> Task:
        self.runner()
        if task_id not in self._pool:
            raise MicrocaseError(f"task {task_id!r} is not in the adapter's task pool")
        return self._pool[task_id]


def run(case: Microcase, candidate: Path, env: ProjectEnv) -> Outcome:
    """Run one microcase against one candidate folder."""
    return RUNNERS[case.kind](case, case.check, candidate.resolve(), env)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _run_text(case: Microcase, check: dict[str, Any], candidate: Path, env: ProjectEnv) -> Outcome:
    path = candidate / check["file"]
    if not path.is_file():
        return Outcome(False, f"{check['file']} to exist in the candidate", "no such file")
    data = path.read_bytes()
    text = data.decode("utf-8", "replace")
    name = check["file"]
    for needle in check.get("contains", []):
        if needle not in text:
            return Outcome(False, f"{name} to contain {needle!r}", f"no such text in {len(data)} bytes")
    for needle in check.get("not_contains", []):
        if needle in text:
            line = text.count("\n", 0, text.index(needle)) + 1
            return Outcome(False, f"{name} not to contain {needle!r}", f"it at line {line}")
    if "matches" in check and not re.search(check["matches"], text, re.MULTILINE):
        return Outcome(False, f"{name} to match /{check['matches']}/", "no match")
    if "not_matches" in check:
        found = re.search(check["not_matches"], text, re.MULTILINE)
        if found:
            return Outcome(False, f"{name} not to match /{check['not_matches']}/", f"{found.group(0)!r}")
    if "max_bytes" in check and len(data) > check["max_bytes"]:
        return Outcome(False, f"{name} to be at most {check['max_bytes']} bytes", f"{len(data)} bytes")
    return Outcome(True, "", "")


def _run_call(case: Microcase, check: dict[str, Any], candidate: Path, env: ProjectEnv) -> Outcome:
    file_part, _, name = check["function"].partition(":")
    request = {"file": file_part, "function": name, "args": check["args"], "kwargs": check["kwargs"]}
    call = f"{check['function']}(*{_short(check['args'])}, **{_short(check['kwargs'])})"
    expect_kind, wanted = next(iter(check["expect"].items()))
    expected = f"{call} {expect_kind.replace('_', ' ')} {_short(wanted)}"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_capevolve.callcheck"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            cwd=candidate,
            timeout=check["timeout_s"],
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Outcome(False, expected, f"no result within timeout_s={check['timeout_s']}")
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return Outcome(False, expected, f"the call process failed (exit {done.returncode}): {tail[0]}")
    if result.get("setup_error"):
        return Outcome(False, expected, result["setup_error"])
    raised = result.get("raised")
    if expect_kind == "raises":
        if raised and wanted in result.get("raised_mro", [raised]):
            return Outcome(True, "", "")
        got = f"{raised}: {result.get('message')}" if raised else f"returned {_short(result.get('value'))}"
        return Outcome(False, expected, got)
    if raised:
        return Outcome(False, expected, f"raised {raised}: {result.get('message')}")
    value = result.get("value")
    return Outcome(_compare(expect_kind, value, wanted), expected, _short(value))


def _compare(kind: str, value: Any, wanted: Any) -> bool:
    if kind == "equals":
        return bool(value == wanted)
    if kind == "contains":
        try:
            return wanted in value
        except TypeError:
            return False
    if kind == "matches":
        return re.search(wanted, value if isinstance(value, str) else json.dumps(value)) is not None
    return is_json_subset(wanted, value)


def is_json_subset(wanted: Any, value: Any) -> bool:
    """Every key of ``wanted`` is in ``value`` with a matching value (recursively for mappings;
    other values compare equal)."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(
            k in value and is_json_subset(v, value[k]) for k, v in wanted.items()
        )
    return bool(wanted == value)


def _scored(env: ProjectEnv, task: Task, rollout: Rollout, wanted: tuple[float, float]) -> Outcome:
    expected = f"reward in [{wanted[0]:g}, {wanted[1]:g}] for task {task.id!r}"
    try:
        score = env.runner().score(task, rollout)
        reward = check_reward(score.reward, f"score({task.id!r})")
    except Exception as exc:
        return Outcome(False, expected, f"the project's scorer raised {type(exc).__name__}: {exc}")
    got = f"reward {reward:g}" + (f" ({_short(score.feedback, 120)})" if score.feedback else "")
    return Outcome(wanted[0] <= reward <= wanted[1], expected, got)


def _run_score(case: Microcase, check: dict[str, Any], candidate: Path, env: ProjectEnv) -> Outcome:
    """Scores with the project's adapter; the candidate is not involved at all."""
    if "rollout" in check:
        path = (case.file.parent / check["rollout"]).resolve()
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise MicrocaseError(
                f"{case.file}: microcase {case.id}: cannot read rollout {path}: {exc}"
            ) from None
        task_id, output = str(check.get("task") or record.get("task_id")), record.get("output")
    else:
        task_id, output = check["task"], check["output"]
    task = env.task(task_id)
    return _scored(env, task, Rollout(task_id=task.id, output=output), check["reward"])


def _run_adapter(case: Microcase, check: dict[str, Any], candidate: Path, env: ProjectEnv) -> Outcome:
    task = env.task(check["task"])
    seed = check.get("seed")
    seed = env.spec.base_seed if seed is None else seed
    runner = env.runner()
    try:
        with runner.live(candidate) as ctx:
            rollout = runner.run_target(task, ctx, seed=seed, split="val")
    except Exception as exc:
        return Outcome(
            False, f"a rollout of task {task.id!r}", f"run_target raised {type(exc).__name__}: {exc}"
        )
    if rollout.error:
        return Outcome(False, f"a rollout of task {task.id!r}", f"an infra error: {rollout.error}")
    return _scored(env, task, rollout, check["reward"])


RUNNERS: dict[str, Callable[[Microcase, dict[str, Any], Path, ProjectEnv], Outcome]] = {
    "text": _run_text,
    "call": _run_call,
    "score": _run_score,
    "adapter": _run_adapter,
}


# -- skeletons from failing rollouts -------------------------------------------------------------

REDACTED = "[gold answer redacted]"


def redact(text: str, gold: Any) -> str:
    """``text`` with every standalone occurrence of the gold answer replaced."""
    if gold is None:
        return text
    needle = gold if isinstance(gold, str) else json.dumps(gold, default=repr)
    if not needle.strip():
        return text
    pattern = re.escape(needle)
    if needle[0].isalnum():
        pattern = r"(?<![\w.])" + pattern
    if needle[-1].isalnum():
        pattern += r"(?![\w])"
    return re.sub(pattern, REDACTED, text)


def skeleton(record: dict[str, Any], *, cluster: str, case_id: str, gold: Any, source: str) -> str:
    """A microcase YAML for a person or an agent to complete: the rollout's input, output and
    the scorer's feedback as its description (the gold answer redacted), and an ``adapter``
    check whose expectation is left as FILL_IN, so it cannot run until someone decides it."""

    def plain(value: Any) -> str:
        return redact(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), gold)

    task_id = str(record["task_id"])
    description = "\n".join(
        [
            f"Scorer feedback: {plain(record.get('feedback') or '(none)')}",
            f"Input: {plain(record.get('input'))}",
            f"Output seen: {plain(record.get('output'))}",
            "Say here what the candidate should do instead.",
        ]
    )
    case = {
        "id": case_id,
        "cluster": cluster,
        "description": description,
        "origin": f"{record.get('split')}/{task_id}/{record.get('tag')}/t{record.get('trial')}",
        "adapter": {"task": task_id, "seed": record.get("seed"), "reward": {"min": PLACEHOLDER, "max": 1.0}},
    }
    reward = record.get("reward")
    header = [
        f"# Skeleton from {source}",
        f"# (task {task_id}, tag {record.get('tag')}, trial {record.get('trial')}, reward {reward}).",
        f"# Replace {PLACEHOLDER} with the reward a fixed candidate must reach, or swap the check:",
        "#   text:  {file: prompt.md, contains: ...}",
        "#   call:  {function: tools/x.py:name, args: [...], expect: {equals: ...}}",
        f"#   score: {{task: {task_id}, output: ..., reward: {{min: 1.0}}}}",
        "# The gold answer is never written here: this file may end up where a candidate can read it.",
    ]
    text = yaml.dump(case, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(header) + "\n" + text


class _BlockDumper(yaml.SafeDumper):
    """Safe dumping, with multi-line strings as readable ``|`` blocks."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)
