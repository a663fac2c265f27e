"""The gate settings a run decides under, frozen at its first deciding session.

A rule picked per session, after seeing the data, is a way to accept noise: the first deciding session logs
its settings, a later one whose settings differ is refused before it pays (a new rule is a new run), every
verdict records and says them, and ``threshold`` with no null control is refused (its bar is a constant the
data never enters). Controller only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..._project.spec import Spec
from ..._project.yamlfile import YamlError, read_yaml
from ..._store.files import RunDirError
from ..._store.log.event_kinds import GATE_SETTINGS_FROZEN
from ..._store.rundir import RunDir

GATE_SETTING_KEYS = (
    "gate_mode", "gate_alpha", "gate_k_se", "gate_threshold", "min_coverage", "gate_alpha_schedule",
    "gate_min_effect", "gate_margin", "screen_alpha", "grow_max_looks",
)  # fmt: skip
# a session's own choice frozen beside them: the family-wise correction across a round's
# siblings (``--capevolve-multiple``); ``none`` picked after a Holm round rejected is a way to
# accept what that round refused
MULTIPLE_KEY = "multiple"


def _as_frozen(was: Mapping[str, Any]) -> dict[str, Any]:
    """A frozen event's settings; without ``gate_margin``, the run was frozen before the key: 0 ("better")."""
    return {"gate_margin": 0.0, **was}


def settings_of(spec: Spec) -> dict[str, Any]:
    return {key: getattr(spec, key) for key in GATE_SETTING_KEYS}


def overridden(override_ini: Iterable[str] | None, spec: Spec) -> dict[str, str]:
    """The gate settings the command line set (``-o``, as typed) that the spec does not pin."""
    found: dict[str, str] = {}
    for item in override_ini or ():
        name, _, value = str(item).partition("=")
        key = name.strip().removeprefix("capevolve_")
        if name.strip().startswith("capevolve_") and key in GATE_SETTING_KEYS:
            found[key] = value.strip()
    if not found:
        return found
    try:
        pinned = read_yaml(spec.path)
    except YamlError:  # the spec loaded a moment ago; read again it can only be as it was
        pinned = {}
    return {key: value for key, value in found.items() if key not in (pinned or {})}


def guards_of(spec: Spec) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value := getattr(spec, key), tuple) else value
        for key in spec.GUARD_KEYS
    }


def guards_off(spec: Spec) -> str | None:
    if spec.leak_guard_min_length is None:
        return (
            "the leak guard is off (leak_guard_min_length: false, frozen with the run): a candidate "
            "holding a val or test task's id or gold answer was not refused"
        )
    return None


def said(overrides: Mapping[str, str]) -> str:
    return "overridden on the command line: " + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))


def check_nulls(spec: Spec, nulls: int, overrides: Mapping[str, str]) -> None:
    if spec.gate_mode == "threshold" and nulls == 0:
        origin = f" ({said(overrides)})" if overrides else ""
        raise RunDirError(
            f"gate_mode threshold with --capevolve-null 0{origin}: a fixed bar "
            f"(gate_threshold {spec.gate_threshold:g}) with no null control measures no noise, so "
            "any lucky no-op clears it; keep --capevolve-null ≥ 1, or gate with a calibrated mode "
            "(gate_mode: exact)"
        )


def check_margin(spec: Spec, sequential: bool) -> None:
    """Refuse a ``gate_margin`` the gate would not read: a legacy ``gate_mode``, or the sequential gate."""
    if not spec.gate_margin:
        return
    if spec.gate_mode != "exact":
        raise RunDirError(
            f"gate_margin {spec.gate_margin:g} is tested by the exact gate only (gate_mode "
            f"{spec.gate_mode} would ignore it and ask 'better'); set gate_mode: exact, or drop gate_margin"
        )
    if sequential:
        raise RunDirError(
            f"gate_margin {spec.gate_margin:g}: the sequential gate asks 'better' and cannot test a "
            "margin yet; gate without --capevolve-sequential (the fixed-n exact gate tests it)"
        )


def freeze_or_check(
    rundir: RunDir, spec: Spec, overrides: Mapping[str, str], multiple: str | None = None
) -> None:
    """Log the settings of the run's first deciding session; refuse a later one whose settings differ."""
    settings = settings_of(spec)
    if multiple is not None:
        settings[MULTIPLE_KEY] = multiple
    with rundir.lock():
        frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
        if not frozen:
            rundir.log.append_event(GATE_SETTINGS_FROZEN, settings=settings, overridden=dict(overrides))
            return
    first = frozen[0]
    was = _as_frozen(first.get("settings") or {})
    if changed := [key for key in settings if key in was and was[key] != settings[key]]:
        shown = ", ".join(
            f"--capevolve-multiple {settings[key]} (frozen {was[key]})"
            if key == MULTIPLE_KEY
            else f"{key} {settings[key]!r} (frozen {was[key]!r})"
            for key in changed
        )
        origin = f"; {said(overrides)}" if overrides else ""
        raise RunDirError(
            f"run {rundir.run_id} froze its gate settings at its first decision (event seq "
            f"{first.get('seq')}): {shown}{origin}. Restore them, or start a new run (--capevolve-new-run) "
            "to decide under other settings"
        )


def decided_under(rundir: RunDir, spec: Spec) -> Spec:
    """``spec`` with the gate settings the run froze at its first decision (``spec`` before any)."""
    frozen = rundir.log.of_kinds(GATE_SETTINGS_FROZEN)
    settings = _as_frozen(frozen[0].get("settings") or {}) if frozen else {}
    known = {key: settings[key] for key in GATE_SETTING_KEYS if key in settings}
    return replace(spec, **known) if known else spec
