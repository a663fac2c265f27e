"""pytest-capevolve: options, ini keys and hook wiring. Thin on purpose.

A capevolve session is ``pytest --capevolve-run PROJECT``: each owed rollout of the project is an
item. The session roles (:mod:`._session.wiring`, starting a kind of :mod:`._session.kinds`) are
registered in the process that owns the run dir; xdist workers only run items. Everything heavy
is imported inside ``pytest_configure``, only when a ``--capevolve-*`` session is asked for."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

EVALUABLE_SPLITS = ("train", "val")
# The spec keys a project may default as ``capevolve_<key>`` ini entries: the spec's INI_KEYS, written
# out so a session without capevolve never imports the spec (test_docs_reference.py keeps them equal)
INI_KEYS = tuple(
    "split_seed split_train split_val split_test split_ids_file num_trials base_seed "
    "success_threshold rollout_timeout_s concurrency gate_mode gate_k_se gate_alpha "
    "gate_threshold min_coverage regression_rule max_metric_calls max_usd max_iterations "
    "stall stop_condition optimizer algorithm_focus store gate_min_effect gate_margin "
    "gate_alpha_schedule screen_alpha grow_max_looks judge_rescores leak_guard_min_length "
    "shared_ledger".split()
)
HYPOTHESIS_PLUGIN = "hypothesispytest"  # its pytest11 entry point's name


# a rollout's node id as a FAILED line prints it: ``capevolve.yaml::val::q05[seed-t0]`` (or ``val::…``);
# a pattern, compiled (and cached by ``re``) at its first use: a plain session whose arguments hold
# no ``::`` never compiles it
_ROLLOUT_ID = r"(?:(.*)::)?(?:train|val|test)::[^:]+\[(.+?)-(?:b\d+-)?t\d+\]"


def _refuse_rollout_ids(config: pytest.Config) -> None:
    """A FAILED line's id pasted where no ``--capevolve-run`` collects it: say so, and what to type (pytest
    alone says only "not found"); ``--lf`` / ``--ff`` there get a line on the rollouts among the last
    failures."""
    if getattr(config.option, "lf", False) or getattr(config.option, "failedfirst", False):
        config.pluginmanager.register(_LastFailedRollouts(), "capevolve-last-failed-rollouts")
    for arg in map(str, config.args):
        if "::" in arg and (found := re.fullmatch(_ROLLOUT_ID, arg)) and not (found[1] or "").endswith(".py"):
            import shlex  # here: a plain pytest session imports nothing more for this check

            from ._project.way_on import diagnose_commands, shown

            folder = Path(found[1] or "capevolve.yaml").parent
            diagnose = diagnose_commands([found[2]], folder)
            raise pytest.UsageError(
                f"{arg} is a rollout of a capevolve run, which only an evaluation session collects: "
                f"pytest --capevolve-run {shlex.quote(shown(folder))} {shlex.quote(arg)} runs it if the run "
                f"owes it; a recorded rollout is never drawn again, and {diagnose} shows what the failed "
                "ones did and why"
            )


class _LastFailedRollouts:
    """``--lf`` / ``--ff`` in a session without ``--capevolve-run``, when the last failures hold rollouts:
    pytest says only "N known failures not in selected tests"; say what they are, and what to type."""

    @staticmethod
    def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
        cache = getattr(config, "cache", None)
        failed = cache.get("cache/lastfailed", {}) if cache is not None else {}
        rollouts = [
            m
            for nodeid in sorted(failed)
            if (m := re.fullmatch(_ROLLOUT_ID, nodeid)) and m[1] and not m[1].endswith(".py")
        ]
        if not rollouts:
            return []

        from ._project.way_on import diagnose_commands

        first, tags = rollouts[0], sorted({m[2] for m in rollouts})
        diagnose = diagnose_commands(tags[:1], (config.rootpath / first[1]).parent)
        return [
            f"capevolve: {len(rollouts)} of the last failures are rollouts of a capevolve run ({first[0]}"
            f"{', …' if len(rollouts) > 1 else ''}), which only an evaluation session collects; a failed "
            f"rollout is never drawn again: {diagnose} shows what the failed "
            f"ones did and why{' (tags: ' + ', '.join(tags) + ')' if len(tags) > 1 else ''}"
        ]


def _split_option(value: str) -> str:
    if value == "test":
        raise pytest.UsageError(
            "--capevolve-split test: the test split is sealed; it is scored once, by "
            "--capevolve-finalize, never by an evaluation session"
        )
    if value not in EVALUABLE_SPLITS:
        raise pytest.UsageError(f"--capevolve-split must be train or val, got {value!r}")
    return value


def _whole_number(flag: str, low: int, high: float, takes: str) -> Callable[[str], int]:
    """The ``type=`` of an option that takes a whole number from ``low`` to ``high``."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if not low <= number <= high:
            raise pytest.UsageError(f"{flag} takes {takes}, got {value!r}")
        return number

    return parse


_null_count = _whole_number("--capevolve-null", 0, 20, "a whole number from 0 to 20")
_concurrency = _whole_number(
    "--capevolve-concurrency", 1, float("inf"), "a whole number ≥ 1 (rollouts in flight per process)"
)


def _progress_interval(value: str) -> float | None:
    """Seconds between progress lines (0: after every rollout), or None for ``off``."""
    if value.strip().lower() == "off":
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also refuses nan
        raise pytest.UsageError(
            "--capevolve-progress takes seconds between progress lines (0: every rollout) or off, "
            f"got {value!r}"
        )
    return seconds


def _failure_lines(value: str) -> str | int:
    """Which failed rollouts get a line: all, auto, none or a count per task."""
    from ._session.reporter import parse_failures

    try:
        return parse_failures(value)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def _block_number(value: str) -> int:
    from ._project.blocks import check_block

    try:
        return check_block(value)
    except ValueError as exc:
        raise pytest.UsageError(f"--capevolve-block: {exc}") from None


def _screen_tier(value: str) -> int:
    if value not in ("1", "2", "3"):
        raise pytest.UsageError(
            f"--capevolve-screen takes a tier, 1, 2 or 3 (25, 50, 75 % of val), got {value!r}"
        )
    return int(value)


def _screen_ids(value: str) -> None:
    raise pytest.UsageError("--capevolve-screen-ids was dropped: screen a tier, --capevolve-screen 1|2|3")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("capevolve", "capevolve: honest evaluation of agent capability changes")

    def option(name: str, help: str, **how: Any) -> None:  # every flag is --capevolve-<name>
        group.addoption(f"--capevolve-{name}", help=help, **how)

    def flag(name: str, help: str) -> None:
        option(name, help, action="store_true")

    option("run", "evaluate the project's candidates: every rollout becomes a test item", metavar="PROJECT")
    option(
        "candidate",
        "candidate capability folder to evaluate (repeatable); default: the current best",
        action="append",
        default=[],
        metavar="CANDIDATE_FOLDER",
    )
    option(
        "tag",
        "tag for the matching --capevolve-candidate (default: the folder's name)",
        action="append",
        default=[],
        metavar="TAG",
    )
    option("split", "train or val (default val; test is sealed)", type=_split_option, metavar="SPLIT")
    flag("rerun", "evaluate again under fresh tags instead of reusing persisted rollouts")
    flag("gate", "gate each candidate against the current best on val and write verdicts")
    option(
        "null",
        "null controls: N byte-identical copies of the best (default 2 when gating)",
        type=_null_count,
        metavar="N",
    )
    flag(
        "veto-regressions",
        "veto an accept when a task the best passed drops by more than its own noise "
        "(--capevolve-regression-rule strict: by anything at all)",
    )
    option(
        "regression-rule",
        "which drops are regressions (default: the spec's regression_rule, noise): noise, a drop beyond "
        "twice its own noise on a task the best passed; strict, any task the best scored higher on",
        choices=("noise", "strict"),
    )
    option(
        "commit",
        "auto (default): book each verdict as a decision; none: leave verdicts as evidence for "
        "`capevolve commit`",
        metavar="auto|none",
    )
    option(
        "multiple", "family-wise correction over a round's candidates (default holm)", metavar="holm|bh|none"
    )
    flag(
        "sequential",
        "with --capevolve-gate: tasks in a seeded order, stop paying once an anytime-valid e-process "
        "decides (accept, or reject for futility against gate_min_effect)",
    )
    option(
        "finalize", "score the best (and the seed) on the sealed test split, once per run", metavar="PROJECT"
    )
    flag(
        "test-reused",
        "with --capevolve-finalize: score test tasks another run of the project already scored, every "
        "view then saying 'test reused — not a held-out estimate' (refused without it)",
    )
    flag(
        "harness-changed",
        "with --capevolve-gate: gate again bytes another run of the project decided under another "
        "harness (a real fix to the adapter or scorer); each such verdict is labelled 're-gated after a "
        "harness change' (no ini twin: it is said each time)",
    )
    option(
        "concurrency",
        "rollouts in flight at once in each process (the session, or each -n worker); default: the "
        "spec's concurrency, else 1",
        type=_concurrency,
        metavar="K",
    )
    option(
        "progress",
        "a progress line (rollouts done/owed, $ spent, budget left) every SECONDS (default 30; 0: after "
        "every rollout; off)",
        type=_progress_interval,
        default=30.0,
        metavar="SECONDS",
    )
    option(
        "failures",
        "which rollouts the agent failed get a line of their own: all, none, at most N per task, or auto "
        "(default: all up to 20, else one per task)",
        type=_failure_lines,
        metavar="all|auto|none|N",
    )
    flag(
        "explain",
        "put each verdict in plain words: what was compared, on how many tasks, what the test says, "
        "what it would take to decide",
    )
    option(
        "block",
        "evaluate under replicate block B: independent trial seeds (base_seed shifted by B × 1,000,000); "
        "0 (default) is the usual evaluation, the only one the gate reads",
        type=_block_number,
        default=0,
        metavar="B",
    )
    # subset screens and grow (_session/subset_screen.py, _session/grow.py)
    option(
        "screen",
        "screen the candidate on part of val (1|2|3 = 25|50|75 %%): kill or promote, never accept",
        type=_screen_tier,
        metavar="TIER",
    )
    option("screen-ids", argparse.SUPPRESS, type=_screen_ids)  # dropped (issue 38): it says so
    flag("grow", "num_trials more trials for the candidate (a tag) and the best, then gate at the pooled n")
    flag("new-run", "start a new run")
    option("run-id", "use this run instead of the newest", metavar="ID")
    for key in INI_KEYS:
        parser.addini(f"capevolve_{key}", f"default for capevolve.yaml key {key}", default="")
    parser.addini("capevolve_split", "default split for --capevolve-run", default="val")
    parser.addini("capevolve_commit", "default for --capevolve-commit (auto|none)", default="")
    parser.addini("capevolve_failures", "default for --capevolve-failures (all|auto|none|N)", default="")
    parser.addini("capevolve_multiple", "default for --capevolve-multiple (holm|bh|none)", default="")
    parser.addini("capevolve_test_reused", "default for --capevolve-test-reused (true|false)", default="")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspec

    pluginmanager.add_hookspecs(hookspec)


def _session_target(config: pytest.Config) -> tuple[str | None, bool]:
    """(project, is_finalize) for this session; the two session kinds exclude each other."""
    run, finalize = config.option.capevolve_run, config.option.capevolve_finalize
    if run and finalize:
        raise pytest.UsageError(
            "--capevolve-run and --capevolve-finalize are separate sessions; run one, then the other"
        )
    if finalize:
        for flag in "candidate split gate rerun new_run block".split():
            if getattr(config.option, f"capevolve_{flag}"):
                import shlex  # here: a plain pytest session imports nothing more for this check

                named = f"--capevolve-{flag.replace('_', '-')}"
                raise pytest.UsageError(
                    f"{named} does not apply to --capevolve-finalize: finalize scores the run's current "
                    "best, once, with the spec's trials; drop the flag, or evaluate with it first "
                    f"(pytest --capevolve-run {shlex.quote(finalize)} {named} …) and finalize after"
                )
    return (finalize or run), bool(finalize)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before any conftest is imported, stop reading the project's bytecode caches."""
    known = early_config.known_args_namespace
    if getattr(known, "capevolve_run", None) or getattr(known, "capevolve_finalize", None):
        from ._project import startup_hooks
        from ._project.adapter import purge, source_only

        named = Path(str(known.capevolve_run or known.capevolve_finalize))
        project = named.parent if named.is_file() else named
        if project.is_dir():
            purge(project)  # what was planted between sessions, before a conftest is read
            source_only(project)
        startup_hooks.remember(fresh=True)


class _HypothesisStartupEnds:
    """Hypothesis's session start, kept when its plugin is blocked: until then, harness code
    using hypothesis is warned of slow code in a plugin (an error under ``filterwarnings``)."""

    def __init__(self, plugin: object) -> None:
        self.plugin = plugin

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.plugin.pytest_sessionstart(session)  # type: ignore[attr-defined]


def _block_hypothesis_plugin(plugins: pytest.PytestPluginManager) -> None:
    """An evaluation session has no test for hypothesis's plugin, which costs a second of
    import per process: blocked, all but its session start (:class:`_HypothesisStartupEnds`)."""
    plugin = plugins.get_plugin(HYPOTHESIS_PLUGIN)
    plugins.set_blocked(HYPOTHESIS_PLUGIN)
    if plugin is not None and hasattr(plugin, "pytest_sessionstart"):
        plugins.register(_HypothesisStartupEnds(plugin), name=f"capevolve-{HYPOTHESIS_PLUGIN}-startup")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    target, finalize = _session_target(config)
    if not target:
        return _refuse_rollout_ids(config)  # not a capevolve session: import nothing more
    from ._session.wiring import configure, refuse_inside_boundary

    refuse_inside_boundary(config)  # the record is out of reach there: say which command works
    _block_hypothesis_plugin(config.pluginmanager)
    split = config.option.capevolve_split or _split_option(config.getini("capevolve_split"))
    from ._project.harness import plugins_in_project

    named = Path(str(target))
    planted = plugins_in_project(config.invocation_params.args, named.parent if named.is_file() else named)
    if planted:
        name, where = planted[0]
        raise pytest.UsageError(
            f"-p {name} loads {where}, a plugin in the project outside the harness lock: hooks a project "
            "runs belong in its conftest.py (locked with the run)"
        )
    ini = {key: str(config.getini(f"capevolve_{key}")) for key in INI_KEYS}
    configure(config, target, split=split, ini=ini)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """An evaluation session collects only its spec; any other session collects microcases
    (YAML files under a ``microcases/`` folder), importing the item code only when one is found."""
    if parent.config.option.capevolve_run or parent.config.option.capevolve_finalize:
        from ._items.nodes import CONTEXT_KEY, SpecFile

        context = parent.config.stash[CONTEXT_KEY]
        return SpecFile.from_parent(parent, path=file_path) if file_path == context.spec.path else None
    if file_path.suffix not in (".yaml", ".yml"):  # most files: nothing of ours imported
        return None
    from ._project.microcase import is_microcase_file

    if is_microcase_file(file_path):
        from ._items.microcases import MicrocaseFile

        return MicrocaseFile.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def capevolve_compare() -> None:
    """Dropped (issue 38): a test that used it fails naming the command that replaced it."""
    pytest.fail("the capevolve_compare fixture was dropped: run `capevolve compare A B` (exit 0 / 10 / 11)")
