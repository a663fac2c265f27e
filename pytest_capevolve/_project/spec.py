"""``capevolve.yaml``: the schema, loading (pyyaml ``safe_load`` only) and validation; every
problem is one :class:`SpecError` naming the file, the key and what would be valid.

A run dir stores a path relative to the project when inside it, absolutely otherwise
(:func:`to_stored`), so the run belongs to its project wherever it lives."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .._decide.alpha_budget import SCHEDULES as ALPHA_SCHEDULES
from .._decide.verdict import REGRESSION_RULES, GateConfig
from ..exitcodes import CapevolveError
from .cap_evolve_keys import not_used_sentence
from .splits import SPLITS, cut_splits
from .yamlfile import YamlError, load_yaml, read_yaml

SPEC_FILENAME = "capevolve.yaml"


def to_stored(path: Path, project_dir: Path) -> str:
    """``path`` as a run dir stores it: posix and relative to ``project_dir`` when inside it
    (``"."`` for the folder itself), absolute otherwise. Both are resolved first."""
    path, project_dir = path.resolve(), project_dir.resolve()
    return path.relative_to(project_dir).as_posix() if path.is_relative_to(project_dir) else str(path)


class SpecError(CapevolveError):
    """The spec (or an ini default) is invalid; the message says where and how to fix it."""


# The guards that decide what may be gated at all (leak guard, tamper guard, harness lock):
# frozen with the run, since switching one off mid-run lets anything be gated.
GUARD_KEYS = ("leak_guard_min_length", "protected_paths", "harness_files")

# Keys whose change would make old rollouts incomparable with new ones, or would change what
# may be gated: a run refuses them.
FROZEN_KEYS = (
    *"adapter capability_path split_seed split_train split_val split_test split_ids_file base_seed".split(),
    "success_threshold",
    "judge_rescores",  # rewards are means of r re-scores: means of another r do not compare
    *GUARD_KEYS,
    "shared_ledger",  # whose decisions count here besides the project's own (_store/memory/shared_ledger.py)
    "sandbox_writable",  # a run measured with one boundary is not compared with another
)


@dataclass(frozen=True)
class Spec:
    """A validated spec. Paths are absolute; everything else is as written or defaulted."""

    path: Path
    project_dir: Path
    adapter: str
    capability_path: Path
    split_seed: int = 0
    split_train: float = 0.5
    split_val: float = 0.25
    split_test: float = 0.25
    split_ids_file: Path | None = None
    num_trials: int = 3
    base_seed: int = GateConfig.seed
    success_threshold: float = GateConfig.success_threshold
    rollout_timeout_s: float | None = None
    concurrency: int = 1
    gate_mode: str = GateConfig.mode
    gate_k_se: float = GateConfig.k_se
    gate_alpha: float = float(GateConfig.alpha)
    gate_threshold: float = GateConfig.threshold
    min_coverage: float = GateConfig.min_coverage
    regression_rule: str = GateConfig.regression_rule
    max_metric_calls: int | None = None
    max_usd: float | None = None
    max_iterations: int | None = None
    stall: int | None = None
    stop_condition: str | None = None
    protected_paths: tuple[str, ...] = field(default_factory=tuple)
    # defaults for `capevolve hill-climb` (its flags win); they change no rollout
    optimizer: str | None = None
    algorithm_focus: str | None = None
    store: str | None = None
    gate_min_effect: float = 0.05  # the sequential gate's futility bar (_decide/stopping.py)
    gate_margin: float = 0.0  # δ in (−1, 0): the exact gate asks "no worse than δ"
    gate_alpha_schedule: str = "constant"  # the val-reuse α budget (_decide/alpha_budget.py)
    screen_alpha: float = 0.05  # a subset screen's kill α
    grow_max_looks: int = 1  # looks a decision may take (_decide/alpha_budget.py)
    judge_rescores: int = 1  # scores per output of a declared-stochastic scorer, averaged
    # the leak guard (_project/leak.py): the shortest id or gold answer that counts; None: off
    leak_guard_min_length: int | None = 4
    # data and config files the harness lock holds besides the adapter's code (_project/harness.py)
    harness_files: tuple[str, ...] = ("default",)
    # a ledger shared with other projects (_store/memory/shared_ledger.py); None: the project's memory only
    shared_ledger: Path | None = None
    # folders candidate code may write besides its scratch (_engine/sandbox.py)
    sandbox_writable: tuple[str, ...] = ()
    FROZEN_KEYS: ClassVar[tuple[str, ...]] = FROZEN_KEYS
    GUARD_KEYS: ClassVar[tuple[str, ...]] = GUARD_KEYS

    @staticmethod
    def locked_value(lock: Mapping[str, Any], key: str) -> Any:
        """``key``'s value in a lock; a key :meth:`to_lock` leaves out at its default is that."""
        if key in lock or key not in _SILENT_DEFAULTS:
            return lock.get(key)
        found = next(f for f in dataclasses.fields(Spec) if f.name == key)
        value = found.default_factory() if callable(found.default_factory) else found.default
        return list(value) if isinstance(value, tuple) else value

    def to_lock(self) -> dict[str, Any]:
        """The resolved spec as plain data, for ``spec.lock.yaml``, paths stored by :func:`to_stored`."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _SILENT_DEFAULTS and value == f.default:
                continue  # a key added later: its default leaves older locks as they were
            if isinstance(value, Path):
                value = to_stored(value, self.project_dir)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


_SILENT_DEFAULTS = frozenset({"judge_rescores", "regression_rule", "shared_ledger", "sandbox_writable"})


def _int(lo: int | None = None, hi: float = math.inf) -> Callable[[Any], int]:
    bounds = "" if lo is None else f" ≥ {lo}" if hi == math.inf else f" from {lo} to {hi}"

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not (lo is None or lo <= value <= hi):
            raise ValueError(f"a whole number{bounds}")
        return value

    return check


def _float(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[Any], float]:
    expected = f"a number in {'(' if lo_open else '['}{lo}, {hi}]"

    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(expected)
        number = float(value)
        if math.isnan(number) or not (number > lo if lo_open else number >= lo) or number > hi:
            raise ValueError(expected)
        return number

    return check


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError("one of " + ", ".join(options))
        return str(value)

    return check


def _gate_mode(value: Any) -> str:
    # imported when a spec is validated, not when the plugin loads (numpy, scipy)
    from .._decide.rules import GATE_MODES

    return _choice(GATE_MODES)(value)


def _gate_margin(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 < value <= 0:
        raise ValueError(
            "a number in (-1, 0]: the loss a candidate may have and still be accepted, e.g. -0.02 "
            "('no worse than 0.02 below the best'); 0 (the default) asks 'better'"
        )
    return float(value)


def _strings(expected: str) -> Callable[[Any], tuple[str, ...]]:
    def check(value: Any) -> tuple[str, ...]:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
            raise ValueError(expected)
        return tuple(values)

    return check


_globs = _strings("a list of glob patterns (strings)")
_paths = _strings("a list of folders (strings, relative to the spec's folder or absolute)")


def _adapter_ref(value: Any) -> str:
    text = _str(value)
    file_part, sep, cls = text.partition(":")
    if not sep or not file_part.endswith(".py") or not cls.isidentifier():
        raise ValueError("'file.py:ClassName', e.g. 'adapter.py:MyAdapter'")
    return text


def _leak_guard(value: Any) -> int | None:
    if value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("a whole number ≥ 1 (shortest task id or gold answer that counts), or false: off")
    return value


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


_INF = math.inf
# `capevolve hill-climb`'s focus schedules and candidate stores (see _loop/prompt.py, _loop/git_store.py)
HILL_CLIMB_FOCUS = ("all", "cyclic", "hardest-first")
# cap-evolve's back-compat names of a focus schedule: accepted, and read as the schedule named
FOCUS_ALIASES = {"all-at-once": "all"}
HILL_CLIMB_STORES = ("git", "copy")
VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "adapter": _adapter_ref,
    "capability_path": _str,
    "split_seed": _int(),
    "split_train": _float(0, 1),
    "split_val": _float(0, 1),
    "split_test": _float(0, 1),
    "split_ids_file": _optional(_str),
    "num_trials": _int(1),
    "base_seed": _int(),
    "success_threshold": _float(0, 1),
    "rollout_timeout_s": _optional(_float(0, _INF, lo_open=True)),
    "concurrency": _int(1),
    "gate_mode": _gate_mode,
    "gate_k_se": _float(0, _INF),
    "gate_alpha": _float(0, 0.25, lo_open=True),  # α = 0.5 would accept one lucky task
    "gate_threshold": _float(-1, 1),
    "min_coverage": _float(0, 1),
    "regression_rule": _choice(REGRESSION_RULES),
    "max_metric_calls": _optional(_int(0)),
    "max_usd": _optional(_float(0, _INF)),
    "max_iterations": _optional(_int(0)),
    "stall": _optional(_int(1)),
    "stop_condition": _optional(_str),
    "protected_paths": _globs,
    "optimizer": _optional(_str),
    "algorithm_focus": _optional(_choice((*HILL_CLIMB_FOCUS, *FOCUS_ALIASES))),
    "store": _optional(_choice(HILL_CLIMB_STORES)),
    "gate_min_effect": _float(0, 0.5),
    "gate_margin": _gate_margin,
    "gate_alpha_schedule": _choice(ALPHA_SCHEDULES),
    "screen_alpha": _float(0, 0.25, lo_open=True),
    "grow_max_looks": _int(1, 3),
    "judge_rescores": _int(1),
    "leak_guard_min_length": _leak_guard,
    "harness_files": _globs,
    "shared_ledger": _optional(_str),
    "sandbox_writable": _paths,
}
REQUIRED = ("adapter", "capability_path")
# Keys a project may default through `capevolve_<key>` ini entries in its pytest config.
_NOT_INI = (*REQUIRED, "protected_paths", "harness_files", "sandbox_writable")
INI_KEYS = tuple(k for k in VALIDATORS if k not in _NOT_INI)


def unknown_key(key: Any, valid: Iterable[str]) -> str:
    """The refusal of a key ``valid`` does not hold, with the nearest valid key (spec, microcases)."""
    near = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key {key!r}{hint}; valid keys: {', '.join(valid)}"


def resolve_spec_path(target: str | Path) -> Path:
    """A project dir or a spec file → the absolute spec file path (or SpecError)."""
    path = Path(target).expanduser().resolve()
    if path.is_dir():
        if not (path / SPEC_FILENAME).is_file():  # the same words from pytest and every command
            raise SpecError(
                f"no {SPEC_FILENAME} in {path}; a project is a folder holding one (or give a spec file)"
            )
        path = path / SPEC_FILENAME
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file; --capevolve-run takes a project folder or a spec file")
    return path


def _parse_ini_value(key: str, raw: str) -> Any:
    """Ini values arrive as strings; read them as YAML scalars so types can be checked."""
    try:
        return load_yaml(raw, f"ini key capevolve_{key}")
    except YamlError as exc:
        raise SpecError(str(exc)) from None


def load_spec(target: str | Path, ini_defaults: Mapping[str, str] | None = None) -> Spec:
    """Read, validate and resolve a spec. ``ini_defaults`` maps key → raw ini string."""
    path = resolve_spec_path(target)
    try:
        raw = read_yaml(path)
    except YamlError as exc:
        raise SpecError(str(exc)) from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the spec must be a mapping of keys to values, got {raw!r}")

    ini = {key: text for key, text in (ini_defaults or {}).items() if text not in (None, "")}
    values: dict[str, Any] = {key: _parse_ini_value(key, text) for key, text in ini.items()}
    foreign = [sentence for key in raw if key not in VALIDATORS and (sentence := not_used_sentence(key))]
    if foreign:  # cap-evolve's own keys: say why each has no use here, all at once
        raise SpecError(
            f"{path}: {'; '.join(foreign)}. Remove them (`capevolve import-cap-evolve` writes a spec "
            "without them)"
        )
    for key, value in raw.items():
        if key not in VALIDATORS:
            raise SpecError(f"{path}: {unknown_key(key, VALIDATORS)}")
        values[key] = value

    for key in REQUIRED:
        if key not in values:
            raise SpecError(f"{path}: missing required key {key!r}")
    checked: dict[str, Any] = {}
    for key, value in values.items():
        try:
            checked[key] = VALIDATORS[key](value)
        except ValueError as exc:
            # an ini default is not in the spec file: name the ini key, not the spec, as the culprit
            origin = f"pytest ini key capevolve_{key}" if key not in raw else f"{path}: key {key!r}"
            raise SpecError(f"{origin} must be {exc}, got {value!r}") from exc

    project_dir = path.parent
    checked["capability_path"] = _existing(path, project_dir, "capability_path", checked, dir_=True)
    if checked.get("split_ids_file") is not None:
        checked["split_ids_file"] = _existing(path, project_dir, "split_ids_file", checked)
    else:
        ratios = [checked.get(f"split_{s}", getattr(Spec, f"split_{s}")) for s in SPLITS]
        if not math.isclose(sum(ratios), 1.0, abs_tol=1e-9):
            raise SpecError(
                f"{path}: split_train + split_val + split_test must sum to 1, "
                f"got {' + '.join(map(str, ratios))} = {sum(ratios):g}"
            )
        if ratios[1] == 0:
            raise SpecError(f"{path}: split_val is 0, so the gate would have no data; make it > 0")
    if checked.get("shared_ledger") is not None:
        checked["shared_ledger"] = _ledger(path, project_dir, checked["shared_ledger"])
    adapter_file = project_dir / checked["adapter"].partition(":")[0]
    if not adapter_file.is_file():
        raise SpecError(
            f"{path}: key 'adapter' names {adapter_file}, which does not exist (paths are relative)"
        )
    return Spec(path=path, project_dir=project_dir, **checked)


def _existing(
    spec_path: Path, project_dir: Path, key: str, values: Mapping[str, Any], *, dir_: bool = False
) -> Path:
    target: Path = (project_dir / values[key]).resolve()
    kind = "folder" if dir_ else "file"
    if not (target.is_dir() if dir_ else target.is_file()):
        raise SpecError(
            f"{spec_path}: key {key!r} names {target}, which is not an existing {kind} "
            "(paths are relative to the spec's folder)"
        )
    return target


def _ledger(spec_path: Path, project_dir: Path, value: str) -> Path:
    """The shared ledger's file: its folder must exist (the file is made on the first write)."""
    target = (project_dir / Path(value).expanduser()).resolve()
    if not target.parent.is_dir() or target.is_dir():
        raise SpecError(
            f"{spec_path}: key 'shared_ledger' names {target}, which is not a file in an existing "
            "folder (paths are relative to the spec's folder); create the folder, or remove the key "
            "to keep decisions in this project alone"
        )
    return target


def splits_for(spec: Spec, pool_ids: Iterable[str]) -> dict[str, Any]:
    """The splits the spec asks for: from ``split_ids_file`` or cut from the pool."""
    pool = set(pool_ids)
    if spec.split_ids_file is None:
        ratios = (spec.split_train, spec.split_val, spec.split_test)
        result = cut_splits(pool, spec.split_seed, ratios)
        source = {"split_seed": spec.split_seed, "ratios": list(ratios)}
    else:
        path = spec.split_ids_file
        try:
            raw = read_yaml(Path(path))
        except YamlError as exc:
            raise SpecError(f"split_ids_file is not valid JSON/YAML: {exc}") from None
        if not isinstance(raw, dict) or not set(raw) <= set(SPLITS):
            raise SpecError(f"{path}: split_ids_file must map train/val/test to lists of task ids")
        result = {}
        for split in SPLITS:
            ids = [str(i) for i in (raw.get(split) or [])]
            unknown = sorted(set(ids) - pool)
            if unknown:
                raise SpecError(
                    f"{path}: split {split!r} names task ids the adapter does not have: "
                    f"{', '.join(map(repr, unknown[:5]))}"
                )
            if len(set(ids)) != len(ids):
                raise SpecError(f"{path}: split {split!r} lists a task id twice")
            result[split] = sorted(ids)
        source = {"split_ids_file": to_stored(Path(path), spec.project_dir)}
    if not result["val"]:
        raise SpecError(f"{spec.path}: the val split is empty; the gate would have no data")
    return {**result, "source": source}
