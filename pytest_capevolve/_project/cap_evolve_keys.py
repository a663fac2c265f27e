"""cap-evolve's spec keys, and what each becomes here: a key of ours, or a sentence why not.

Read by :mod:`.spec` (a cap-evolve key is refused with its sentence) and by
``capevolve import-cap-evolve``, which reports a key not listed here as unknown."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# cap-evolve keys that mean the same here, under the same name. The values are translated by
# :func:`translate` where cap-evolve's meaning differs (0 = "unlimited / off" for ceilings).
SAME = tuple(
    "capability_path split_seed split_train split_val split_test split_ids_file num_trials gate_mode "
    "gate_k_se max_iterations max_metric_calls max_usd stall stop_condition protected_paths "
    "algorithm_focus store".split()
)
# cap-evolve ceilings where 0 means "unlimited" (stall: "off"); here unlimited is the key left out
ZERO_IS_OFF = ("max_iterations", "max_metric_calls", "max_usd", "stall")
# cap-evolve's `gate_mode: auto` is its paired test (falling back when no per-task data)
GATE_MODE_ALIASES = {"auto": "paired"}
# cap-evolve's old algorithm names are hill-climb focus schedules
ALGORITHM_FOCUS = {
    "hill-climb": "all",
    "all-at-once": "all",
    "cyclic": "cyclic",
    "hardest-first": "hardest-first",
}

_HILL_CLIMB_FLAG = "it is a flag of `capevolve hill-climb` here, not a spec key: pass {flag}"
_OPTIMIZER = (
    "the optimizer here is one command line (spec key `optimizer`, or `capevolve hill-climb "
    "--optimizer 'CMD {{workdir}} {{prompt}}'`): put its {what} in that command"
)

# Every other cap-evolve key: why it has no counterpart here.
NOT_USED: dict[str, str] = {
    "orchestration_mode": (
        "the loop is always driven from outside the measurement here — a coding agent calling "
        "the primitives (work new, a gate session, commit) or `capevolve hill-climb` — so there "
        "is no mode to choose"
    ),
    "algorithm_skill": (
        "the one built-in search is `capevolve hill-climb` (its focus schedule is "
        "`algorithm_focus`); any other search is an optimizer calling the loop's primitives"
    ),
    "algorithm_args": "the hill-climb's knobs are its flags (`capevolve hill-climb --help`)",
    "optimizer_skill": _OPTIMIZER.format(what="name"),
    "optimizer_model": _OPTIMIZER.format(what="model"),
    "optimizer_max_turns": _OPTIMIZER.format(what="turn cap"),
    "optimizer_usd_per_iter": _OPTIMIZER.format(what="per-iteration $ cap"),
    "optimizer_instructions_file": _HILL_CLIMB_FLAG.format(flag="--instructions-file"),
    "max_optimizer_usd": (
        "`max_usd` here caps runner and optimizer $ together (the optimizer's as booked by "
        "`capevolve commit --optimizer-usd`); there is no optimizer-only cap"
    ),
    "capabilities": _HILL_CLIMB_FLAG.format(flag="--capabilities"),
    "convergence": _HILL_CLIMB_FLAG.format(flag="--convergence"),
    "store_commit_cmd": (
        "no command store here: `capevolve hill-climb --store git` (the default) or `--store copy`"
    ),
    "actions": "a candidate is a folder and any edit to it is allowed except `protected_paths`",
    "capability_sources": (
        "nothing copies files into the optimizer's work copy here; name what it should read in "
        "its prompt (`capevolve hill-climb --instructions-file`)"
    ),
    "runner_repo_path": "read-only context for the optimizer goes in its command or prompt, not in the spec",
    "target_model": "the model the agent runs on is the adapter's business; nothing here reads it",
    "target_profile_file": "the optimizer's prompt is `capevolve hill-climb --instructions-file`",
    "runner_model": "the model the agent runs on is the adapter's business; nothing here reads it",
    "model": "the model the agent runs on is the adapter's business; nothing here reads it",
    "dataset_source": "tasks always come from the adapter's tasks('all')",
    "reuse_baseline": (
        "a run resumes itself here (no persisted rollout is paid twice); a cap-evolve run's rollouts "
        "are not carried over: the imported project starts with a baseline here"
    ),
    "dashboard": "every session writes a self-contained dashboard.html; there is no server",
    "dashboard_port": "every session writes a self-contained dashboard.html; there is no server",
    "observers": "telemetry observers are not wired here; events.jsonl is the run's log",
    "metric_primary": (
        "the gate reads one number, the reward; other metrics are recorded with each rollout "
        "(`Score.metrics`) and never gate"
    ),
    "metrics_display": "metrics travel with each rollout (`Score.metrics`); they are shown, never gated",
    "metric_directions": "metrics travel with each rollout (`Score.metrics`); they are shown, never gated",
    "github_integration": "nothing here writes to GitHub",
}


def not_used_sentence(key: str) -> str | None:
    """The one sentence for a cap-evolve-only key, or None for a key cap-evolve does not have."""
    reason = NOT_USED.get(key)
    return None if reason is None else f"{key!r} is a cap-evolve key, not used here, because {reason}"


@dataclass
class Translation:
    """A cap-evolve spec, read: the keys of ours it gives, and a line for every other key."""

    spec: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # cap-evolve key → what happened to it
    unknown: list[str] = field(default_factory=list)  # keys neither table knows


def translate(raw: Mapping[str, Any]) -> Translation:
    """Map a cap-evolve spec (as read from YAML) to ours. Pure; paths are left as written."""
    out = Translation()
    for key, value in raw.items():
        if key in SAME:
            _same(out, key, value)
        elif key == "algorithm_skill" and str(value) in ALGORITHM_FOCUS:
            # cap-evolve's hill-climb (or an old focus name for it) is ours, with that focus
            out.spec.setdefault("algorithm_focus", ALGORITHM_FOCUS[str(value)])
            out.notes[key] = f"{value!r} is `capevolve hill-climb` here (its schedule: algorithm_focus)"
        elif key in NOT_USED:
            out.notes[key] = f"not used here, because {NOT_USED[key]}"
        else:
            out.unknown.append(str(key))
            out.notes[str(key)] = "not a key cap-evolve's spec reader knows; left out"
    return out


def _same(out: Translation, key: str, value: Any) -> None:
    if key in ZERO_IS_OFF and (value is None or value == 0):
        out.notes[key] = f"{value!r} means unlimited in cap-evolve; left out (no ceiling)"
        return
    if key == "gate_mode" and value in GATE_MODE_ALIASES:
        out.spec[key] = GATE_MODE_ALIASES[value]
        out.notes[key] = f"{value!r} is cap-evolve's paired test: gate_mode {out.spec[key]!r}"
        return
    if key == "protected_paths" and isinstance(value, str):
        value = [p.strip() for p in value.split(",") if p.strip()]
    out.spec[key] = value
    out.notes[key] = f"kept as {key}"
