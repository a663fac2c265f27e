"""What a capevolve session costs beyond pytest's own: its fixed CPU, as the suite pays it.

A session of ``examples/noisy_agent`` cut to one trial (40 val tasks) — an evaluation of the seed
(40 rollouts) and a gate of ``improved`` (seed, improved and two null controls: 160 rollouts, the
microcases first), and the evaluation over two xdist workers (``-n 2``) — next to a plain pytest session of as many trivial items, each run with
``pytest.main`` in one interpreter, as the suite's pytester runs them in process, with the suite's
plugins only (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, ``PYTEST_PLUGINS`` xdist's and ours). CPU is
user + system of the interpreter and of every child it waited for (sandbox children, ``call``
microcases), each session on a fresh copy of the project. Per case: the first session of a fresh
interpreter (it pays the imports, as a user's ``pytest --capevolve-run`` does) and the median of
the later ones (what each further in-process session of the suite pays). Interleaved rounds, so
a change of load hits every case alike; ratios against the plain session of the same items.

``--baseline REV``: the same cases against REV's package (``git archive`` into a temporary
folder put first on ``PYTHONPATH``, children included), interleaved with this checkout's, and
the ratio now / baseline. ``--phases``: for this checkout, where a later session's CPU goes —
pytest's phases (a hookwrapper around each, this process and its children apart), the children
started (by executable, from the ``subprocess.Popen`` audit event) and, in a sandbox child, its
interpreter's start, its imports, its confinement, the adapter's import and its rollouts.
Bytecode is read from one fresh cache (``PYTHONPYCACHEPREFIX``) per tree, as on a user's machine.

    python benchmarks/session_cost.py [--rounds N] [--sessions K] [--baseline REV] [--phases]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEAN = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "xdist.plugin,pytest_capevolve.plugin"}
ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:anyio"]
CASES = {  # name: (arguments of both sessions, of ours only, trivial items of the plain session)
    "evaluate": ([], [], 40),
    "gate": ([], ["--capevolve-candidate", "{project}/candidates/improved", "--capevolve-gate"], 160),
    "evaluate -n 2": (["-n", "2"], [], 40),
}

# One interpreter: K + 1 sessions of one case; prints the CPU of each (JSON), the first apart.
RUNNER = r"""
import contextlib, io, json, os, resource, shutil, sys
import pytest

def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime

source, scratch, sessions, items = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
extra = json.loads(sys.argv[5])
os.chdir(scratch)
if items:
    plain = os.path.join(scratch, "plain")
    os.makedirs(plain, exist_ok=True)
    with open(os.path.join(plain, "test_items.py"), "w") as out:
        out.write(f"import pytest\n@pytest.mark.parametrize('i', range({items}))\ndef test_item(i):\n    pass\n")
figures = []
for k in range(sessions + 1):
    if items:
        argv = [*extra, plain]
    else:
        project = os.path.join(scratch, f"p{k}")
        shutil.copytree(source, project, ignore=shutil.ignore_patterns(".capevolve"))
        argv = [*(a.replace("{project}", project) for a in extra), "--capevolve-run", project]
    before = cpu()
    with contextlib.redirect_stdout(io.StringIO()) as said:
        code = pytest.main(argv)
    after = cpu()
    if code not in (0, 1, 10):
        sys.exit(f"pytest {' '.join(argv)} exited {code}:\n{said.getvalue()[-3000:]}")
    figures.append([after[0] - before[0], after[1] - before[1]])
print("FIGURES=" + json.dumps(figures))
"""

# ``-p session_cost_phases``: pytest's phases, this process and its children apart, and the
# children each session starts; a sandbox child's own parts (see CHILD_PROBE) appended to a file.
PHASES = r"""
import json, os, resource, sys
import pytest

def _cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime

_started = []
def _audit(event, args):
    if event == "subprocess.Popen":
        argv = list(args[1]) if isinstance(args[1], (list, tuple)) else [str(args[1])]
        what = os.path.basename(str(args[0]))
        if len(argv) > 2 and argv[1] in ("-P", "-s", "-c", "-m"):
            what += " " + next((a for a in argv[1:] if not a.startswith("-")), "")[:60]
        _started.append(what)
sys.addaudithook(_audit)

_phases = {}
def _timed(name):
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def wrapper(*args, **kwargs):
        before = _cpu()
        try:
            return (yield)
        finally:
            after = _cpu()
            own, kids = _phases.get(name, (0.0, 0.0))
            _phases[name] = (own + after[0] - before[0], kids + after[1] - before[1])
    return wrapper

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config):  # the whole session after its options: its line written last
    before = _cpu()
    try:
        return (yield)
    finally:
        after = _cpu()
        _phases["main"] = (after[0] - before[0], after[1] - before[1])
        with open(os.environ["SESSION_COST_PHASES"], "a") as out:
            out.write(json.dumps({"phases": _phases, "started": _started}) + "\n")
        _phases.clear()
        _started.clear()

_mark = {}

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):  # historic: no wrapper; configure ends where the session starts
    _mark["configure"] = _cpu()

@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    before, after = _mark.pop("configure"), _cpu()
    _phases["configure"] = (after[0] - before[0], after[1] - before[1])

pytest_collection = _timed("collection")
pytest_runtestloop = _timed("runtestloop")
pytest_sessionfinish = _timed("sessionfinish")
pytest_unconfigure = _timed("unconfigure")
"""

# What a sandbox child runs instead of the package's one line, to time its own parts: the same
# line, with a file opened before it confines itself (it can write nothing after).
CHILD_PROBE = r"""
import atexit, resource
def _c():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
_t = {"interpreter": _c()}
_out = open(__OUT__, "a")
import pytest_capevolve._engine.sandbox_child as _sc
_t["imports"] = _c() - _t["interpreter"]
def _wrap(name, f):
    def timed(*a, **k):
        t = _c()
        try:
            return f(*a, **k)
        finally:
            _t[name] = _t.get(name, 0.0) + _c() - t
    return timed
_sc.confined = _wrap("confinement", _sc.confined)
_sc.load_adapter = _wrap("adapter", _sc.load_adapter)
_sc.Child.run_inline = _wrap("rollouts", _sc.Child.run_inline)
_sc.Child.answer = _wrap("answers", _sc.Child.answer)
def _done():
    _t["total"] = _c()
    _out.write(repr(_t) + "\n")
    _out.flush()
atexit.register(_done)
_sc.main()
"""


def one_trial(folder: Path) -> Path:
    """``examples/noisy_agent`` with one trial a task (40 val tasks), as the suite's builds cut it."""
    project = folder / "noisy_agent"
    shutil.copytree(REPO / "examples" / "noisy_agent", project, ignore=shutil.ignore_patterns(".capevolve"))
    spec = project / "capevolve.yaml"
    text = spec.read_text()
    if "num_trials: 5\n" not in text:
        raise SystemExit(
            "examples/noisy_agent/capevolve.yaml no longer holds num_trials: 5: update one_trial"
        )
    spec.write_text(text.replace("num_trials: 5\n", "num_trials: 1\n"))
    return project


def environment(folder: Path, *first: Path) -> dict[str, str]:
    """The suite's environment, bytecode cached in ``folder``, ``first`` put first on the path."""
    env = {**os.environ, **LEAN, "PYTHONPYCACHEPREFIX": str(folder / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    paths = [*map(str, first), *filter(None, [os.environ.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run(
    case: str, plain: bool, source: Path, sessions: int, env: dict[str, str], scratch: Path
) -> list[list[float]]:
    both, ours, items = CASES[case]
    scratch.mkdir(parents=True)
    try:
        argv = [sys.executable, "-c", RUNNER, str(source), str(scratch), str(sessions)]
        argv += [str(items if plain else 0), json.dumps(ARGS + both + ([] if plain else ours))]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or "FIGURES=" not in done.stdout:
            raise SystemExit(f"{case} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.rpartition("FIGURES=")[2])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args: argparse.Namespace, folder: Path, source: Path) -> None:
    trees: dict[str, Path | None] = {"now": None}
    if args.baseline:
        base = folder / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        trees["baseline"] = base
    envs = {name: environment(folder / name, *filter(None, [tree])) for name, tree in trees.items()}
    # rows: (case, plain?, tree) -> [(first session's CPU, median of the later ones)]
    rows: dict[tuple[str, bool, str], list[tuple[float, float]]] = {}
    for round_ in range(args.rounds + 1):  # round 0 writes the bytecode caches, and is dropped
        for case in CASES:
            for plain in (True, False):
                for name in trees:
                    figures = run(case, plain, source, args.sessions, envs[name], folder / "scratch")
                    first = sum(figures[0])
                    later = statistics.median(sum(f) for f in figures[1:])
                    if round_:
                        rows.setdefault((case, plain, name), []).append((first, later))
    print(
        f"CPU s of one session (user + system, children included), median of {args.rounds} interleaved "
        f"rounds; 'later': the median of {args.sessions} sessions after the first in one interpreter"
    )
    head = f"{'case':32} {'first':>7} {'/plain':>7} {'later':>7} {'/plain':>7}"
    print(head + ("  now/baseline: first  later" if args.baseline else ""))
    for case, (_, _, items) in CASES.items():
        for name in trees:
            plain = rows[case, True, name]
            ours = rows[case, False, name]
            p_first, p_later = (statistics.median(r[i] for r in plain) for i in (0, 1))
            o_first, o_later = (statistics.median(r[i] for r in ours) for i in (0, 1))
            label = f"{case} ({name})" if args.baseline else case
            print(f"{'plain, ' + str(items) + ' items':32} {p_first:7.3f} {'':7} {p_later:7.3f}")
            line = f"{label:32} {o_first:7.3f} {o_first / p_first:6.2f}x {o_later:7.3f} {o_later / p_later:6.2f}x"
            if name == "now" and args.baseline:
                b_first, b_later = (
                    statistics.median(r[i] for r in rows[case, False, "baseline"]) for i in (0, 1)
                )
                line += f"  {o_first / b_first:19.3f}x {o_later / b_later:6.3f}x"
            print(line)


def phases(args: argparse.Namespace, folder: Path, source: Path) -> None:
    """Where a later session's CPU goes, in this checkout (see the module's docstring)."""
    out, child_out = folder / "phases.jsonl", folder / "child.txt"
    probe = folder / "probe"
    probe.mkdir()
    (probe / "session_cost_phases.py").write_text(
        PHASES
        # the sandbox child runs the probe instead of the package's one line (benchmark only)
        + "import pytest_capevolve._engine.sandbox_process as _p\n_p.CHILD = 'import capevolve_child_probe'\n"
    )
    (probe / "capevolve_child_probe.py").write_text(CHILD_PROBE.replace("__OUT__", repr(str(child_out))))
    env = environment(folder / "now", probe)
    runner_env = {**env, "PYTEST_PLUGINS": env["PYTEST_PLUGINS"] + ",session_cost_phases"}
    runner_env["SESSION_COST_PHASES"] = str(out)
    for case, (both, _, _) in CASES.items():
        if both:  # over xdist workers: the phases are the controller's, the rollouts elsewhere
            continue
        out.unlink(missing_ok=True)
        child_out.unlink(missing_ok=True)
        figures = run(case, False, source, args.sessions, runner_env, folder / "scratch")[1:]
        sessions = [json.loads(line) for line in out.read_text().splitlines()][1:]  # the first pays imports
        rows: dict[str, list[float]] = {}
        for session, (own, kids) in zip(sessions, figures, strict=True):
            phases = {name: spent[0] for name, spent in session["phases"].items()}
            main = phases.pop("main")
            rows.setdefault("before the session (options, plugins, ini)", []).append(own - main)
            for name, spent in phases.items():
                rows.setdefault(name, []).append(spent)
            rows.setdefault("the rest (session start, registrations, clean-up)", []).append(
                main - sum(phases.values())
            )
            rows.setdefault("this process", []).append(own)
            # a child's CPU counts when it is reaped, which may be in a later phase: only the total
            rows.setdefault("its children", []).append(kids)
        print(f"\n{case}: where a later session's CPU goes (s, median of {len(sessions)} sessions)")
        for name, spent in rows.items():
            print(f"  {statistics.median(spent):6.3f}  {name}")
        started: dict[str, int] = {}
        for what in sessions[0]["started"]:
            started[what] = started.get(what, 0) + 1
        print("  children started per session: " + ", ".join(f"{n} × {w}" for w, n in started.items()))
        children = [eval(line) for line in child_out.read_text().splitlines()]  # noqa: S307 (our own repr)
        if children:
            parts = sorted({k for c in children for k in c})
            print(
                f"  a sandbox child (median of {len(children)}): "
                + ", ".join(f"{k} {statistics.median(c.get(k, 0.0) for c in children):.4f}" for k in parts)
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=4, help="sessions after the first, per interpreter")
    parser.add_argument("--baseline", metavar="REV", help="also measure REV's package, interleaved")
    parser.add_argument("--phases", action="store_true", help="where a session's CPU goes, this checkout")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="session-cost-") as tmp:
        folder = Path(tmp)
        source = one_trial(folder / "source")
        if args.phases:
            phases(args, folder, source)
        else:
            measure(args, folder, source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
