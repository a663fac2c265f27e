"""The kernel boundary itself (``_confine.landlock``): which paths are granted, and what a process
confined by it can and cannot do. The confined half runs in a fresh interpreter per case — a
ruleset is for good, and this process must stay free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_capevolve._confine.landlock import Boundary, abi, confine, readable_around
from pytest_capevolve._confine.launch import command

pytestmark = (
    pytest.mark.confined
)  # the tests of the boundary: confined even under CAPEVOLVE_TEST_UNCONFINED=1

needs_landlock = pytest.mark.skipif(
    abi() < 6 and not os.environ.get("CI"),
    reason="this kernel offers no Landlock with scoping (ABI >= 6); CI's machines do, and there this fails",
)


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "proj"
    (project / ".capevolve" / "runs").mkdir(parents=True)
    (project / ".capevolve" / "runs" / "gold.json").write_text("42")
    (project / "adapter.py").write_text("x = 1")
    (project / "data").mkdir()
    (project / "data" / "tasks.json").write_text("[]")
    (tmp_path / "beside").mkdir()
    return project, project / ".capevolve"


def test_readable_around_grants_every_neighbour_and_never_the_hidden_folder_or_a_way_into_it(tmp_path):
    project, hidden = _tree(tmp_path)
    (project / "link_in").symlink_to(hidden / "runs")  # a link into the hidden folder is not a way in
    (project / "link_out").symlink_to(tmp_path / "beside")

    granted = {Path(p) for p in readable_around([hidden], root=tmp_path)}

    assert granted == {tmp_path / "beside", project / "adapter.py", project / "data", project / "link_out"}
    assert not any(p == hidden or hidden in p.parents or p in hidden.parents for p in granted)


def test_readable_around_under_a_hidden_root_grants_only_the_links_that_lead_out(tmp_path):
    # the walk skips the climb for entries that are no links only below a root that is not hidden
    project, hidden = _tree(tmp_path)
    (hidden / "link_out").symlink_to(tmp_path / "beside")
    (hidden / "link_in").symlink_to(hidden / "runs")

    granted = readable_around([hidden], root=hidden)

    assert granted == [str(hidden / "link_out")]


def test_readable_around_with_nothing_hidden_grants_the_root(tmp_path):
    assert readable_around([], root=tmp_path) == [str(tmp_path)]


# each script's try-an-action helper: an action's outcome is "ok" or the errno's text
_ATTEMPT = """
def attempt(name, action):
    try:
        action()
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = exc.strerror
"""

_PROBE = (
    r"""
import json, os, sys
from pathlib import Path
from pytest_capevolve._confine.landlock import Boundary, confine
boundary = Boundary.from_json(json.loads(sys.argv[1]))
state = confine(boundary)
seen = {"label": state.label, "confined": state.confined}
"""
    + _ATTEMPT
    + r"""attempt("read_project", lambda: open(sys.argv[2] + "/adapter.py").read())
attempt("read_hidden", lambda: open(sys.argv[2] + "/.capevolve/runs/gold.json").read())
attempt("write_scratch", lambda: open(sys.argv[3] + "/out", "w").write("x"))
attempt("write_project", lambda: open(sys.argv[2] + "/planted.py", "w").write("x"))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
attempt("read_python", lambda: open(os.__file__).read())
print(json.dumps(seen))
"""
)


def _probe(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    project, hidden = _tree(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    boundary = Boundary(writable=(scratch,), hidden=(hidden,))
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(boundary.as_json()), str(project), str(scratch)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "read the project's memory of other runs (decisions, seals: in `.capevolve/`) or a shared ledger"
    ),
    outcome="prevented: hidden (EACCES)",
    unconfined="labelled unconfined",
    note="the mechanism",
)
@needs_landlock
def test_a_confined_process_reads_the_project_writes_only_its_scratch_and_cannot_signal_out(tmp_path):
    seen = _probe(tmp_path)

    assert seen["confined"] is True
    assert seen["read_project"] == seen["read_python"] == seen["write_scratch"] == "ok"
    assert seen["read_hidden"] == os.strerror(13)  # EACCES
    assert seen["write_project"] == os.strerror(13)
    assert seen["signal_parent"] == os.strerror(1)  # EPERM: signals are scoped
    assert not (tmp_path / "proj" / "planted.py").exists()


def test_without_landlock_the_same_process_runs_unconfined_and_says_so(tmp_path):
    seen = _probe(tmp_path, {"CAPEVOLVE_LANDLOCK": "off"})

    assert seen["confined"] is False
    assert "unconfined" in str(seen["label"]) and "CAPEVOLVE_LANDLOCK=off" in str(seen["label"])
    assert seen["read_hidden"] == seen["write_project"] == "ok"


@needs_landlock
def test_the_launcher_confines_the_command_it_starts_and_its_children(tmp_path):
    project, hidden = _tree(tmp_path)
    (tmp_path / "scratch").mkdir()
    boundary = Boundary(writable=(tmp_path / "scratch",), hidden=(hidden,))

    done = subprocess.run(
        command(boundary, ["sh", "-c", f"cat {hidden}/runs/gold.json; kill -0 {os.getpid()}; echo $?"]),
        capture_output=True,
        text=True,
    )

    assert "Permission denied" in done.stderr
    assert done.stdout.strip().endswith("1")  # kill -0 failed: the evaluator cannot be signalled


def test_a_boundary_that_would_grant_a_hidden_folder_is_refused_before_anything_is_applied(tmp_path):
    project, hidden = _tree(tmp_path)

    with pytest.raises(ValueError, match="hidden"):
        confine(Boundary(writable=(tmp_path,), hidden=(hidden,)))


# a process candidate code forked, which left its sandbox child's process group and session
# (``setsid`` after a fork: beyond the group kill that ends a child) and acts during a later
# rollout, another sandbox child's (the best's, a null control's)
_ESCAPEE = (
    """
import json, os, signal, socket, sys
from pytest_capevolve._confine.landlock import Boundary, confine
state = confine(Boundary.from_json(json.loads(sys.argv[1])))
if os.fork():
    os._exit(0)  # the child candidate code started ends: what it forked lives on
os.setsid()  # out of the sandbox child's process group and session
seen = {"confined": state.confined, "own_group": os.getpgrp() == os.getpid()}
"""
    + _ATTEMPT
    + """attempt("write_sibling_scratch", lambda: open(sys.argv[3] + "/answer.json", "w").write("{}"))
attempt("signal_evaluator", lambda: os.kill(int(sys.argv[4]), 0))
attempt("signal_sibling", lambda: os.kill(int(sys.argv[2]), signal.SIGKILL))
attempt("read_sibling_environ", lambda: open(f"/proc/{sys.argv[2]}/environ", "rb").read())
attempt("bind_tcp", lambda: socket.socket().bind(("127.0.0.1", 0)))
attempt("bind_udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 0)))
status = open("/proc/self/status").read().splitlines()
seen["capabilities"] = [line.split()[1] for line in status if line.startswith(("CapEff", "CapBnd"))]
print(json.dumps(seen), flush=True)
"""
)

# a sandbox child running a rollout: confined by a boundary of its own, waiting on its pipe
_SIBLING = """
import json, sys
from pytest_capevolve._confine.landlock import Boundary, confine
confine(Boundary.from_json(json.loads(sys.argv[1])))
print("ready", flush=True)
sys.stdin.read()
"""


def _escape(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[dict[str, object], subprocess.Popen]:
    """What the escapee did to a sibling sandbox child (confined by its own boundary, with a scratch
    of its own), and the sibling (the caller ends it)."""
    _, hidden = _tree(tmp_path)
    best, candidate = tmp_path / "scratch-best", tmp_path / "scratch-candidate"
    best.mkdir()
    candidate.mkdir()
    env = {**os.environ, **(env or {})}
    sibling = subprocess.Popen(
        [sys.executable, "-c", _SIBLING, json.dumps(Boundary((best,), (hidden,), bind_tcp=False).as_json())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert sibling.stdout is not None and sibling.stdout.readline() == b"ready\n"
    boundary = json.dumps(Boundary((candidate,), (hidden,), bind_tcp=False).as_json())
    escapee = subprocess.run(  # its output ends when the last of the two processes does
        [sys.executable, "-c", _ESCAPEE, boundary, str(sibling.pid), str(best), str(os.getpid())],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
    )
    return json.loads(escapee.stdout), sibling


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "a process candidate code started that leaves its sandbox child's process group (`setsid` "
        "after a fork, beyond the group kill that ends the child) and, during a later rollout of "
        "another tag (the best's, a null control's), kills that rollout's sandbox child (charged to "
        "that tag as its failure) or writes its scratch"
    ),
    outcome=(
        "prevented: a new session leaves no Landlock domain; the sibling child is outside it (EPERM, "
        "signals scoped) and so is its scratch (EACCES); the session too. Nor can it read the sibling's "
        "`/proc/PID/environ` (it holds no capability, even run as root) or bind a TCP port (ABI ≥ 4); "
        "it can bind a UDP one (Landlock governs TCP only)"
    ),
    unconfined=(
        "**not held**: the kill lands and the best's rollout is booked as its failure, as killing the "
        "session is (every view says unconfined)"
    ),
)
@needs_landlock
def test_a_process_that_left_its_childs_group_still_cannot_reach_a_sibling_child(tmp_path):
    seen, sibling = _escape(tmp_path)
    try:
        assert seen["confined"] is True and seen["own_group"] is True
        assert seen["signal_sibling"] == seen["signal_evaluator"] == os.strerror(1)  # EPERM
        assert seen["write_sibling_scratch"] == os.strerror(13)  # EACCES
        assert seen["read_sibling_environ"] == os.strerror(13)  # root's too: no CAP_SYS_ADMIN, CAP_PERFMON
        assert seen["capabilities"] == ["0000000000000000"] * 2  # effective and bounding: none, for good
        if abi() >= 4:
            assert seen["bind_tcp"] == os.strerror(13) and seen["bind_udp"] == "ok"  # what Landlock governs
        assert sibling.poll() is None  # never signalled: it still waits on its pipe
        assert not (tmp_path / "scratch-best" / "answer.json").exists()
    finally:
        sibling.kill()
        sibling.communicate()  # reaped, its pipes closed


def test_unconfined_the_same_process_kills_a_sibling_child(tmp_path):
    """What the boundary holds, shown by its absence (``CAPEVOLVE_LANDLOCK=off``)."""
    seen, sibling = _escape(tmp_path, {"CAPEVOLVE_LANDLOCK": "off"})
    try:
        assert seen["confined"] is False
        assert seen["signal_sibling"] == seen["write_sibling_scratch"] == seen["bind_tcp"] == "ok"
        assert sibling.wait() == -9
    finally:
        sibling.kill()
        sibling.communicate()  # reaped, its pipes closed
