"""Shared fixtures: private copies of the bundled examples, helpers that edit or read a copied
project, one way to run a capevolve session on it (``capevolve``) and one build per process of a
project several tests start from (``built``); for the two halves of a split test file, a cap-evolve project and run to import (``cap_evolve``) and the openai_agent
example's stand-in endpoint (``standin``).

Tests take these as fixtures; no test module imports from this file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import scipy.stats  # noqa: F401  (the statistics import scipy where it is used: keep it loaded)
from cap_evolve_project import ADAPTER, DATA, SPEC, _rollout
from fix_list_project import fixing, make_fix_list, split_ids
from openai_example import standin_server

# The plugin imports the session code (numpy, scipy) only when a capevolve session starts. An
# in-process pytester run drops what it imported when it ends, and numpy cannot be imported
# twice in one process; importing it here keeps it loaded across in-process runs (the controller's
# part, `starting`, is imported only where a session plans: an xdist worker imports neither numpy nor it).
import pytest_capevolve._session.starting  # noqa: F401
import pytest_capevolve._session.wiring  # noqa: F401
from pytest_capevolve._store.rollouts.record import RolloutRecord
from pytest_capevolve._store.rundir import RunDir
from pytest_capevolve._store.sessions import order_secret

pytest_plugins = "pytester"

# Machines that set PYTHONDONTWRITEBYTECODE (the ones this project is built on do) make every
# interpreter the suite starts (pytester subprocesses, inner xdist workers, CLI calls) compile
# the package from source again; the suite runs as Python does by default instead, caching it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
# A copy of ../shared/data (public cap-evolve run on tau2-bench airline); see data/README.md.
SHARED_DATA = Path(__file__).resolve().parent / "data" / "tau2-airline-v4-val-per-task.json"

# End-to-end tests run once in-process and once fanned out over two xdist workers, and must
# agree (pytest-cov's xdist_params).
XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2")]

Example = Callable[..., Path]

# What every session a test starts leaves out: anyio's pytest plugin (installed here by the
# openai and inspect extras, read by no test's session) imports anyio in each new process — an
# inner xdist worker, a session in a child — ~0.1 CPU-s each. Blocking it is not a load (the
# harness lock reads `-p NAME` loads only). Moot where autoload is off (below); kept for the
# tests marked `autoload`.
LEAN = ["-p", "no:anyio"]

# The plugins a session a test starts needs: xdist's and ours, by module name (pytest 8.1 reads
# PYTEST_PLUGINS as module names only; an entry point's name such as "xdist" works from 8.4 on).
# Every other installed plugin (hypothesis's ~0.27 CPU-s, anyio's ~0.1, platformdirs') is left
# unloaded in each pytest process the suite starts: a pytester subprocess, an in-process run, a
# `capevolve` command's session, the xdist workers of each. See :func:`_autoload_off_unless_marked`.
INNER_PLUGINS = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTEST_PLUGINS": "xdist.plugin,pytest_capevolve.plugin",
}


# The order secret a run makes at its start is random; a test's runs get this fixed one instead,
# as they get a fixed base_seed, so a sequential gate sees val in the same orders every time the
# test runs (tests/unit/test_task_order.py restores the OS's randomness where it is the subject).
# The nonce drawn per candidate's bytes is empty in tests, for the same reason; the test that
# replays an order computed in advance draws real ones.
# It also names the folders candidates run from (:func:`pytest_capevolve._store.snapshots.folder_name`),
# so it fixes what a simulator keyed on the folder draws.
FIXED_ORDER_SECRET = bytes(range(32))
# Every process the suite starts takes the test's secret through the environment (a run a child
# session makes: child_secret/sitecustomize.py); the folder is on this process's sys.path too, as
# first there as in a child's, because the harness lock holds the start-up hooks found on sys.path
# and a run begun here and gated in a child (the red team's) must see the same ones.
CHILD_SECRET = Path(__file__).resolve().with_name("child_secret")
if str(CHILD_SECRET) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(CHILD_SECRET), os.environ.get("PYTHONPATH")])
    )
if str(CHILD_SECRET) not in sys.path:
    sys.path.insert(0, str(CHILD_SECRET))
# Under FIXED_ORDER_SECRET noisy_agent's seed draws lucky on val (z = +0.84, +1.18 at 1 and 2 trials),
# so a gain gated against it at few trials can look like none. The tests whose claim is such a gain
# (or a regression killed on a subset) pin this one instead (:func:`typical_seed_draws`):
# sha256(b"capevolve-test-secret-17"), the first N whose seed draws sit within ±0.6 SD of their
# expectation at 1, 2 and 5 trials (z = -0.15, -0.56, +0.10). Sessions the suite starts as child
# processes take it too (the variable below).
CHILD_ORDER_SECRET = "CAPEVOLVE_TEST_ORDER_SECRET"  # child_secret/sitecustomize.py's VARIABLE
TYPICAL_SEED_SECRET = bytes.fromhex("bdea656368382bec0ecb5c0418e8c333e9831d38632831b921289ba8b4181944")


# A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and so would every session it starts: Python installs no KeyboardInterrupt where
# SIGINT is ignored, and the tests that press Ctrl-C saw sessions run to the end. Restored here,
# so children of this process (xdist workers, pytester subprocesses) start with it delivered.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The suite's own workers (``pytest -n 2``, the README's command) share the tests by work
    stealing instead of xdist's ``load``: ``load`` refills a worker with up to a quarter of what
    is left, so one worker took ~150 of the last e2e tests (minutes of sessions) while the other
    ran the unit tests' ~1,000 in seconds and then stood idle. A worker that runs dry takes half of
    the other's queue. Controller only, for this suite's session alone (a session a test starts
    is configured from its own folder, which this file is not in); ``--dist`` other than ``load``
    is left as asked."""
    if config.getoption("dist", None) != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


# The files whose dearest test takes 5 CPU-s or more, dearest first (`python benchmarks/suite_cpu.py
# --where`, session 30: the newcomer's path 25.2, the inspect bridge 22.3, the inspect how-to 14.3, ...).
DEAREST_FIRST = (
    "e2e/test_newcomer_path.py",
    "e2e/test_inspect_bridge.py",
    "e2e/test_compare_e2e.py",
    "e2e/test_playbooks.py",
    "e2e/test_openai_agent.py",
    "e2e/test_loop_to_the_letter.py",
    "e2e/test_candidate_bytes.py",
    "e2e/test_attacks_redteam.py",
    "e2e/test_attacks_sequential_reads.py",
    "e2e/test_hill_climb.py",
    "e2e/test_screen_grow_e2e.py",
    "e2e/test_merge.py",
    "e2e/test_controller_stop.py",
    "e2e/test_attacks_sequential.py",
    "e2e/test_gate_e2e.py",
    "e2e/test_dashboard.py",
    "e2e/test_docs_commands.py",
    "e2e/test_finalize.py",
    "e2e/test_agent_boundary.py",
)
FOLDERS_FIRST = ("e2e", "calibration", "unit")


def _cost_rank(item: pytest.Item) -> int:
    """Where an item goes in the suite's order: the dearest files, then the other sessions, the
    calibration rates, the pure tests, anything else (the microcases)."""
    path = item.path.as_posix()
    for rank, file in enumerate(DEAREST_FIRST):
        if path.endswith(f"/tests/{file}"):
            return rank
    for rank, folder in enumerate(FOLDERS_FIRST, start=len(DEAREST_FIRST)):
        if f"/tests/{folder}/" in path:
            return rank
    return len(DEAREST_FIRST) + len(FOLDERS_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite's items, dearest first (a stable sort: a file's tests keep their order), on the
    controller and on every worker alike. Work stealing hands each worker a slice of this order
    and moves the end of the longest queue to a worker that runs dry; with the long sessions at
    the front, the last minute of a ``-n 2`` run is short tests on both cores (measured: tests of
    1-2 CPU-s on both until 3 s before the end), not one long session on one core while the other
    idles (before: a 5.1 CPU-s test alone for the last 40 s). A session a test starts is not
    ordered (it is configured from its own folder)."""
    items.sort(key=_cost_rank)


@pytest.fixture(autouse=True)
def _boundary_on_unless_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Sandbox children run confined, as a user's do (where the kernel offers Landlock), except
    in tests marked ``unconfined``: those test what holds where there is no boundary (macOS, an
    old kernel, ``CAPEVOLVE_LANDLOCK=off``), and each says why in its docstring; they run with
    ``CAPEVOLVE_LANDLOCK=off``. A ``CAPEVOLVE_LANDLOCK`` set in the shell that started the suite
    is dropped for the others, so no test runs unconfined by accident.
    ``CAPEVOLVE_TEST_UNCONFINED=1`` runs every test unconfined but those marked ``confined`` (the
    tests of the boundary itself), to tell a failure the boundary causes from any other.

    Named to sort before every autouse fixture that takes ``monkeypatch`` (pytest sets autouse
    fixtures up in name order), so it is set up before and torn down after it: a test's own
    ``monkeypatch.delenv("CAPEVOLVE_LANDLOCK")`` is undone first, and the variable does not
    outlive the test."""
    marked_off = request.node.get_closest_marker("unconfined") is not None
    all_off = os.environ.get("CAPEVOLVE_TEST_UNCONFINED") == "1"
    with pytest.MonkeyPatch.context() as own:
        if marked_off or (all_off and request.node.get_closest_marker("confined") is None):
            own.setenv("CAPEVOLVE_LANDLOCK", "off")
        else:
            own.delenv("CAPEVOLVE_LANDLOCK", raising=False)
        yield


@pytest.fixture(autouse=True)
def _autoload_off_unless_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """The pytest sessions a test starts load only the plugins they use (:data:`INNER_PLUGINS`,
    through the environment every one of them reads: in process, in a child, behind a
    ``capevolve`` command, on an xdist worker), except in tests marked ``autoload``: those run
    their sessions as a user's run, with every installed plugin autoloaded, so a plugin that
    breaks ours (or that ours must tame, as hypothesis's) still fails a test — the newcomer's
    path and the README's quickstart among them. ``CAPEVOLVE_TEST_AUTOLOAD=1`` autoloads in every
    test, to tell a failure this causes from any other. An ssh worker's login gets a fresh
    environment and autoloads there, as on a real host.

    Both variables or neither: with autoload on, ``PYTEST_PLUGINS`` would register xdist's and
    our module a second time under another name (pluggy refuses). Sessions a test starts share
    one environment, so the harness lock (which holds ``PYTEST_PLUGINS``) sees no change between
    them; a build kept across tests is kept apart by it (:class:`Built`). Named to sort before the
    autouse fixtures that take ``monkeypatch``, as :func:`_boundary_on_unless_marked` is."""
    autoload = (
        request.node.get_closest_marker("autoload") is not None
        or os.environ.get("CAPEVOLVE_TEST_AUTOLOAD") == "1"
    )
    with pytest.MonkeyPatch.context() as own:
        for name, value in INNER_PLUGINS.items():
            if autoload:
                own.delenv(name, raising=False)
            else:
                own.setenv(name, value)
        yield


@pytest.fixture(autouse=True)
def _fixed_order_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    pin_order_secret(monkeypatch, FIXED_ORDER_SECRET)


@pytest.fixture
def typical_seed_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs this test makes take :data:`TYPICAL_SEED_SECRET` (set up after, so over, the suite's)."""
    pin_order_secret(monkeypatch, TYPICAL_SEED_SECRET)


def pin_order_secret(monkeypatch: pytest.MonkeyPatch, secret: bytes) -> None:
    """The runs the test makes take ``secret`` and empty nonces: in this process, and in every child
    session it starts (child_secret/sitecustomize.py reads the variable)."""
    monkeypatch.setattr(order_secret, "new_secret", lambda: secret)
    monkeypatch.setattr(order_secret, "new_nonce", lambda: b"")
    monkeypatch.setenv(CHILD_ORDER_SECRET, secret.hex())


@pytest.fixture(params=XDIST_MODES)
def xdist_args(request: pytest.FixtureRequest) -> list[str]:
    return list(request.param)


@pytest.fixture
def repo() -> Path:
    """The repository checkout, for tests that read its own files (examples, CI recipe)."""
    return REPO


@pytest.fixture
def examples() -> Path:
    """The bundled examples folder; read-only — tests that write use :func:`example`."""
    return EXAMPLES


@pytest.fixture
def example(pytester: pytest.Pytester) -> Example:
    """``example(name, dest=None) -> Path``: a private copy of a bundled example (without any
    run dir) at ``pytester.path / (dest or name)``, for a test to edit and evaluate."""

    def copy(name: str, dest: str | None = None) -> Path:
        target = pytester.path / (dest or name)
        shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns(".capevolve", "__pycache__"))
        return target

    return copy


class Projects:
    """Edit a copied project before a session, and read its newest run after one."""

    @staticmethod
    def edit_spec(project: Path, old: str, new: str) -> None:
        """Replace text in a copied project's spec (the text must be there)."""
        spec = project / "capevolve.yaml"
        text = spec.read_text()
        assert old in text
        spec.write_text(text.replace(old, new))

    @staticmethod
    def add_adapter(project: Path, source: str, ref: str) -> None:
        """Append an adapter subclass to a copied example's adapter.py and point its spec at it."""
        with (project / "adapter.py").open("a") as handle:
            handle.write(source)
        named = next(
            line
            for line in (project / "capevolve.yaml").read_text().splitlines()
            if line.startswith("adapter:")
        )
        Projects.edit_spec(project, named, f"adapter: {ref}")

    @staticmethod
    def writable(project: Path, *folders: str) -> list[Path]:
        """Name ``folders`` (relative to the project, or absolute) in the spec's
        ``sandbox_writable`` and create them: where an adapter or candidate writes from ``live()``
        or ``run_target``, as a user is told to (a confined sandbox child may write only there and
        in its ``TMPDIR``)."""
        spec = project / "capevolve.yaml"
        text = spec.read_text()
        assert "sandbox_writable" not in text
        spec.write_text(text.rstrip("\n") + f"\nsandbox_writable: [{', '.join(folders)}]\n")
        made = [project / folder for folder in folders]
        for folder in made:
            folder.mkdir(parents=True, exist_ok=True)
        return made

    @staticmethod
    def no_test_split(project: Path) -> None:
        """toy_calc with its test share moved to train: a run without a holdout."""
        Projects.edit_spec(project, "split_train: 0.25", "split_train: 0.5")
        Projects.edit_spec(project, "split_test: 0.25", "split_test: 0.0")

    @staticmethod
    def one_trial_with_noop(project: Path, line: str = "") -> Path:
        """A copied noisy_agent cut to one trial, with a no-op candidate ``noop`` (``line`` — by
        default a blank one — added to the seed's prompt.md: new bytes, the same behaviour); the
        candidate folder."""
        Projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
        noop = project / "candidates" / "noop"
        shutil.copytree(project / "capability", noop)
        with (noop / "prompt.md").open("a") as handle:
            handle.write(f"\n{line}\n" if line else "\n")
        return noop

    @staticmethod
    def with_tool_code(project: Path, name: str, code: str) -> Path:
        """A copied noisy_agent cut to one trial and without microcases (the gate runs the candidate's
        code, not a screen), with a candidate ``name``: the seed plus ``code`` appended to its
        tools/reply.py, which the adapter runs in every rollout; the candidate folder."""
        Projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
        shutil.rmtree(project / "microcases")
        candidate = project / "candidates" / name
        shutil.copytree(project / "capability", candidate)
        with (candidate / "tools" / "reply.py").open("a") as handle:
            handle.write(code)
        return candidate

    @staticmethod
    def run_dir(project: Path) -> Path:
        """The project's newest run dir."""
        return sorted((project / ".capevolve" / "runs").iterdir())[-1]

    @staticmethod
    def snapshot(project: Path, tag: str) -> Path:
        """The folder ``tag`` is evaluated from in the project's newest run (named from the run's
        secret, never by the tag: :func:`pytest_capevolve._store.snapshots.folder_name`)."""
        return RunDir(Projects.run_dir(project)).snapshots.snapshot_dir(tag)

    @staticmethod
    def tags_by_folder(project: Path) -> dict[str, str]:
        """The newest run's snapshot folder names, each to the tag it holds (what an adapter logging
        ``Path(ctx).name`` saw, read back as tags)."""
        snapshots = RunDir(Projects.run_dir(project)).snapshots
        return {snapshots.snapshot_dir(tag).name: tag for tag in snapshots.known_tags()}

    @staticmethod
    def rollout_records(project: Path) -> dict[tuple[str, str, str, int], dict]:
        """Every persisted rollout of the project's newest run, keyed, with timings dropped."""
        records = {}
        for path in (Projects.run_dir(project) / "rollouts").rglob("*.json"):
            record = json.loads(path.read_text())
            record.pop("seconds")
            record.pop("run_id")
            records[(record["split"], record["task_id"], record["tag"], record["trial"])] = record
        return records


@pytest.fixture
def projects() -> Projects:
    """Helpers that edit a copied project's files or read its newest run dir."""
    return Projects()


class Built:
    """One build of a project per process (per xdist worker), for the tests that start from the
    same sessions: ``built(key, dest, make)`` runs ``make()`` (which returns the project it made
    at ``pytester.path / dest``, and anything else of it, such as a session's RunResult) in the
    first test that asks for ``key`` and keeps a copy; every later test gets a copy of that copy at
    its own ``pytester.path / dest``, and what ``make`` returned. Only for tests whose assertions
    do not depend on building it themselves: a project is its own wherever it lives
    (test_moved_project.py), and a copy carries its run dir whole. A build made unconfined is
    kept apart from one made confined (a run records how its sessions ran), and one made with
    every plugin autoloaded from one made lean (the harness lock holds ``PYTEST_PLUGINS``)."""

    def __init__(self, pytester: pytest.Pytester, cache: dict[str, tuple[Path, Any]], root: Path) -> None:
        self.pytester, self.cache, self.root = pytester, cache, root

    def __call__(self, key: str, dest: str, make: Callable[[], tuple[Path, Any]]) -> tuple[Path, Any]:
        target = self.pytester.path / dest
        key = f"{key}-landlock-{os.environ.get('CAPEVOLVE_LANDLOCK', 'default')}"
        key += "-lean" if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else "-autoloaded"
        if key not in self.cache:
            project, made = make()
            assert project == target, (project, target)
            kept = self.root / key / dest
            shutil.copytree(project, kept, symlinks=True)
            self.cache[key] = (kept, made)
            return project, made
        kept, made = self.cache[key]
        shutil.copytree(kept, target, symlinks=True)
        return target, made


@pytest.fixture(scope="session")
def _builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, tuple[Path, Any]], Path]:
    return {}, tmp_path_factory.mktemp("built")


@pytest.fixture
def built(pytester: pytest.Pytester, _builds: tuple[dict[str, tuple[Path, Any]], Path]) -> Built:
    """``built(key, dest, make) -> (project, what make returned)``: see :class:`Built`."""
    return Built(pytester, *_builds)


class Capevolve:
    """Runs one capevolve session on a project through pytester (see :func:`capevolve`)."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester

    def args(
        self,
        project: Path,
        *candidates: str | Path,
        gate: bool = False,
        tags: Sequence[str] = (),
        finalize: bool = False,
        extra: Sequence[str] = (),
        cache: bool = False,
    ) -> list[str]:
        """The command line: a candidate given as a ``str`` is a folder under the project's
        ``candidates/``, a ``Path`` is used as it is; ``tags`` pair with candidates in order.
        ``-p no:cacheprovider`` unless ``cache`` (a test of ``--lf`` or stepwise needs it), and
        always ``-p no:anyio`` (:data:`LEAN`)."""
        args = ["--capevolve-finalize" if finalize else "--capevolve-run", str(project)]
        for candidate in candidates:
            folder = candidate if isinstance(candidate, Path) else project / "candidates" / candidate
            args += ["--capevolve-candidate", str(folder)]
        for tag in tags:
            args += ["--capevolve-tag", tag]
        if gate:
            args.append("--capevolve-gate")
        return [*args, *LEAN, *([] if cache else ["-p", "no:cacheprovider"]), *extra]

    def __call__(
        self,
        project: Path,
        *candidates: str | Path,
        gate: bool = False,
        tags: Sequence[str] = (),
        finalize: bool = False,
        extra: Sequence[str] = (),
        subprocess: bool = False,
        timeout: float | None = None,
    ) -> pytest.RunResult:
        """Evaluate ``candidates`` (default: the best) on ``project``, or finalize it, in
        process or (``subprocess=True``, for tests that kill the session) in a child."""
        args = self.args(project, *candidates, gate=gate, tags=tags, finalize=finalize, extra=extra)
        if subprocess:
            return self.pytester.runpytest_subprocess(*args, timeout=timeout)
        return self.pytester.runpytest(*args)


@pytest.fixture
def capevolve(pytester: pytest.Pytester) -> Capevolve:
    """``capevolve(project, *candidates, gate=, tags=, finalize=, extra=, subprocess=, timeout=)``
    runs ``pytest --capevolve-run PROJECT --capevolve-candidate ... -p no:cacheprovider *extra``
    (or ``--capevolve-finalize PROJECT``) in pytester's folder and returns the RunResult."""
    return Capevolve(pytester)


@pytest.fixture
def one_trial_baseline(built: Built, example: Example, projects: Projects, capevolve: Capevolve) -> Path:
    """examples/noisy_agent cut to one trial, after its first session (the seed's val rollouts):
    built once per process (:class:`Built`), a copy for each test."""

    def make() -> tuple[Path, None]:
        project = example("noisy_agent")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
        result = capevolve(project)
        assert result.ret == 0, result.stdout.str()
        return project, None

    return built("noisy-agent-one-trial-baseline", "noisy_agent", make)[0]


@pytest.fixture
def improved_gated(
    built: Built, example: Example, projects: Projects, capevolve: Capevolve
) -> tuple[Path, pytest.RunResult]:
    """examples/noisy_agent cut to two trials, after the gate of 'improved' (the README's first
    command at n = 2), and that session's result: built once per process (:class:`Built`), a copy
    for each test."""

    def make() -> tuple[Path, pytest.RunResult]:
        project = example("noisy_agent")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
        return project, capevolve(project, "improved", gate=True)

    return built("noisy-agent-two-trials-improved-gated", "noisy_agent", make)


@pytest.fixture
def noop_gated(built: Built, example: Example, projects: Projects, capevolve: Capevolve) -> Path:
    """examples/noisy_agent cut to one trial, whose candidate ``noop`` is the seed's bytes plus a
    notes.md, after its gate (rejected, not booked: ``--capevolve-commit none``): built once per
    process (:class:`Built`), a copy for each test."""

    def make() -> tuple[Path, None]:
        project = example("noisy_agent")
        projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
        shutil.copytree(project / "capability", project / "candidates" / "noop")
        (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")
        result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
        assert result.ret == 10, result.stdout.str()[-2000:]
        return project, None

    return built("noisy-agent-one-trial-noop-gated", "noisy_agent", make)[0]


@pytest.fixture
def toy_calc_baseline(built: Built, example: Example, capevolve: Capevolve) -> Path:
    """examples/toy_calc after its first session (the seed's val rollouts, the splits frozen):
    built once per process (:class:`Built`), a copy for each test."""

    return _after_first_session(
        built, "toy-calc-baseline", "toy_calc", capevolve, lambda: example("toy_calc")
    )


@pytest.fixture
def fix_list_baseline(built: Built, example: Example, projects: Projects, capevolve: Capevolve) -> Path:
    """The fix-list project (tests/fix_list_project.py, at ``pytester.path / "fixes"``) after its
    first session (the seed's val rollouts, the splits frozen): built once per process
    (:class:`Built`), a copy for each test."""

    return _after_first_session(
        built, "fix-list-baseline", "fixes", capevolve, lambda: make_fix_list(example, projects)
    )


def _after_first_session(
    built: Built, key: str, dest: str, capevolve: Capevolve, project: Callable[[], Path]
) -> Path:
    """``project()`` after its first session, built once per process under ``key``: a copy each."""

    def make() -> tuple[Path, None]:
        made = project()
        result = capevolve(made)
        assert result.ret == 0, result.stdout.str()
        return made, None

    return built(key, dest, make)[0]


@pytest.fixture
def fix_list_big_accepted(built: Built, example: Example, projects: Projects, capevolve: Capevolve) -> Path:
    """The fix-list project after its first session and the gate of ``big`` (the seed plus five
    val tasks fixed: p = 1/32, accepted at α = 0.05), booked (``--capevolve-commit auto``): built
    once per process (:class:`Built`), a copy for each test."""

    def make() -> tuple[Path, None]:
        project = make_fix_list(example, projects)
        assert capevolve(project).ret == 0
        fixing(project, "big", split_ids(project, "val")[:5])
        gated = capevolve(project, "big", gate=True, extra=["--capevolve-commit", "auto"])
        assert gated.ret == 0, gated.stdout.str()
        return project, None

    return built("fix-list-big-accepted", "fixes", make)[0]


@pytest.fixture
def val_rollout() -> Callable[..., RolloutRecord]:
    """``val_rollout(tag, task, trial, reward, infra=None)``: a val rollout record, as a worker
    would ship it, for tests that build evidence by hand (``infra`` set: an infra error)."""

    def make(
        tag: str, task: str, trial: int, reward: float | None, infra: str | None = None
    ) -> RolloutRecord:
        return RolloutRecord(
            run_id="r",
            split="val",
            task_id=task,
            tag=tag,
            trial=trial,
            seed=trial,
            candidate_hash="h",
            reward=reward,
            infra_error=infra,
        )

    return make


@pytest.fixture
def shared_data() -> dict:
    if not SHARED_DATA.is_file():
        pytest.fail(f"shared evaluation data missing at {SHARED_DATA}")
    return json.loads(SHARED_DATA.read_text())


@pytest.fixture
def cap_evolve(tmp_path, shared_data):
    """(cap-evolve's project folder, its run dir): ``.capevolve/project`` and
    ``.capevolve/run_<ts>`` as cap-evolve lays them out, holding the real run's rewards."""
    base = tmp_path / "cap-evolve-repo" / ".capevolve"
    project = base / "project"
    (project / "adapters").mkdir(parents=True)
    (project / "capevolve.yaml").write_text(SPEC)
    (project / "adapters" / "adapter.py").write_text(ADAPTER)
    (project / "adapters" / "model_config.py").write_text('MODEL = "aws/gpt-oss-120b"\n')
    seed = project / "seed_capability"
    (seed / "policy").mkdir(parents=True)
    (seed / "policy" / "policy.md").write_text("# Airline agent policy\nVerify the user id first.\n")
    (seed / "tools").mkdir()
    (seed / "tools" / "tools.py").write_text("def calculate(expression):\n    return expression\n")
    val_ids = sorted(shared_data["seed"], key=int)
    test_data = json.loads((DATA / "cap-evolve-v4-test-per-task.json").read_text())["FINAL"]
    test_ids = sorted(test_data, key=int)
    train_ids = [str(i) for i in range(50) if str(i) not in set(val_ids) | set(test_ids)]
    (project / "agentopt_split.json").write_text(
        json.dumps({"train": train_ids, "val": val_ids, "test": test_ids})
    )

    run = base / "run_20260816_101112"
    (run / "rollouts" / "val").mkdir(parents=True)
    (run / "rollouts" / "test").mkdir(parents=True)
    (run / "splits.json").write_text(
        json.dumps({"train": train_ids, "val": val_ids, "test": test_ids, "seed": 0, "test_used": True})
    )
    (run / "state.json").write_text(
        json.dumps(
            {
                "best_id": "seed",
                "budget": {
                    "max_iterations": 8,
                    "max_metric_calls": 600,
                    "max_usd": 55.0,
                    "stall": 5,
                    "max_optimizer_usd": 40.0,
                },
                "spent": {"iterations": 5, "metric_calls": 550, "usd": 0.0, "stall": 5},
            }
        )
    )
    for tag, per_task in shared_data.items():
        snapshot = run / "candidates" / tag
        shutil.copytree(seed, snapshot)
        if tag.startswith(("cA", "cB")):  # the two real edits (the nulls are byte-identical copies)
            with open(snapshot / "policy" / "policy.md", "a") as handle:
                handle.write(f"Edit {tag}.\n")
        for tid, row in per_task.items():
            for k, reward in enumerate(row["trials"]):
                path = run / "rollouts" / "val" / f"{tid}__{tag}__t{k}.json"
                path.write_text(json.dumps(_rollout(tid, reward, row["feedback"])))
    for tid, row in test_data.items():
        for k, reward in enumerate(row["trials"]):
            path = run / "rollouts" / "test" / f"{tid}__FINAL__t{k}.json"
            path.write_text(json.dumps(_rollout(tid, reward, "")))
    (run / "events.jsonl").write_text(
        json.dumps({"t": 0, "kind": "splits", "train": 26, "val": 12, "test": 12}) + "\n"
    )
    return project, run


@pytest.fixture
def standin():
    """examples/openai_agent's stand-in OpenAI endpoint, serving on 127.0.0.1 in a thread."""
    server = standin_server.StandIn().start()
    yield server
    server.stop()


def _hypothesis_profiles() -> None:
    """Deterministic, deadline-free property runs: the machines are shared and timing is not a
    property. Skipped without hypothesis: pytest loads this conftest (through ``testpaths``)
    for a capevolve session started from the checkout's root, after the plain install too."""
    try:
        from hypothesis import settings
    except ImportError:
        return
    settings.register_profile("capevolve", deadline=None, max_examples=60, derandomize=True, print_blob=True)
    # benchmarks/mutation.py runs the fast tests once per mutant: fewer examples keep it to minutes
    settings.register_profile("capevolve-mutation", parent=settings.get_profile("capevolve"), max_examples=12)
    settings.load_profile("capevolve-mutation" if "MUTANT_UNDER_TEST" in os.environ else "capevolve")


_hypothesis_profiles()
