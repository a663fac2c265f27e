"""What a confined sandbox child can learn of the other arms of its session, besides its own folder's
name (which names its tag: ``test_attacks_null_controls.py``). A null control measures the best's noise
only if the best's code runs as if alone: these replays put code in the best that looks past its own
child, at the run dir's files by name and at its sibling children, on ``examples/noisy_agent`` cut to
one trial (its seed runs before its null controls on every task)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_capevolve._store.rundir import RunDir

# appended to the best's tools/reply.py (run in every rollout, after its draw): the draws of the next
# rollouts in its child are shared with every other child running the best's bytes. The first run of a
# (trial seed, task) leaves its draw's key in a folder every run looks in (``_shared``), and every later
# run of the best's bytes takes that key for its own. No run needs to know its tag: the best runs first,
# so the null controls repeat its draws. ``_mine`` is where a run leaves its key.
SHARE_DRAWS = """
import hashlib as _hashlib, os as _os, tempfile as _tempfile

{FOLDERS}

def _shared_sha256(data=b"", **kw):
    parts = bytes(data).split(b":", 2)
    if len(parts) != 3 or not parts[0].isdigit():  # not noisy_agent's draw key: hashed as it is
        return _hashlib._true_sha256(data, **kw)
    name = "draw-" + _hashlib._true_sha256(b":".join(parts[:2])).hexdigest()
    for folder in _shared():
        try:
            data = open(_os.path.join(folder, name), "rb").read()
            break
        except OSError:
            pass
    else:
        try:
            _os.makedirs(_mine(), exist_ok=True)
            with open(_os.path.join(_mine(), name), "wb") as out:
                out.write(data)
        except OSError:
            pass
    return _hashlib._true_sha256(data, **kw)

if not hasattr(_hashlib, "_true_sha256"):
    _hashlib._true_sha256 = _hashlib.sha256
    _hashlib.sha256 = _shared_sha256
"""

# each child's scratch folder: the others' found in their environment (`/proc/PID/environ`) and by
# listing the folder that holds its own (until session 31, /tmp, readable)
IN_SCRATCH = """
def _mine():
    return _tempfile.gettempdir()

def _shared():
    found = [_mine()]
    try:
        found += [_os.path.join(_os.path.dirname(_mine()), n) for n in _os.listdir(_os.path.dirname(_mine()))]
    except OSError:
        pass
    for pid in _os.listdir("/proc"):
        if pid.isdigit():
            try:
                environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
            except OSError:
                continue
            found += [kv[7:].decode() for kv in environ if kv.startswith(b"TMPDIR=")]
    return found
"""

# a folder of shared memory every child may write (multiprocessing's semaphores live there)
IN_SHARED_MEMORY = """
def _mine():
    return SHARED

def _shared():
    return [SHARED]
"""


def _gate_a_noop(example, projects, capevolve, dest: str, best_code: str) -> dict:
    """noisy_agent at one trial under cap-evolve's legacy ``paired`` rule (Δ̄ > SE, which the null floor
    backs), ``best_code`` appended to the seed's reply tool, and ``c7`` (the seed's own bytes and a blank
    line: the same agent, without that code) gated in the first session: the verdicts by tag."""
    project = example("noisy_agent", dest)
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.edit_spec(project, "gate_mode: exact", "gate_mode: paired")
    noop = project / "candidates" / "c7"
    shutil.copytree(project / "capability", noop)
    (noop / "prompt.md").write_text((noop / "prompt.md").read_text() + "\n")
    with (project / "capability" / "tools" / "reply.py").open("a") as handle:
        handle.write(best_code)
    assert capevolve(project, "c7", gate=True).ret in (0, 10)
    verdicts = projects.run_dir(project) / "verdicts"
    return {
        tag: json.loads((verdicts / f"{tag}.json").read_text()) for tag in ("c7", "seed-null1", "seed-null2")
    }


def _spread(verdicts: dict) -> float:
    return max(abs(verdicts[tag]["delta_mean"]) for tag in ("seed-null1", "seed-null2"))


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "the best's code shares its draws between its own sandbox children: each finds the others' scratch "
        "folders, in their `/proc/PID/environ` (readable across Landlock domains to a process holding "
        "CAP_SYS_ADMIN or CAP_PERFMON, as root's do) or by listing the folder that holds its own (`/tmp`), "
        "reads them, and takes the draw key a first run of the (trial seed, task) left there. It needs no "
        "tag: the best runs first, so its null controls repeat its draws. Until session 31 it worked: "
        "in session 30's run the nulls' spread fell from 0.1000 to 0.0250 and a no-op `c7` was accepted "
        "under `gate_mode: paired`; replayed on d050c6ff under the suite's fixed secret (1 trial, 40 val "
        "tasks; noisy_agent), from 0.1000 to 0.0000"
    ),
    outcome=(
        "held: every child's scratch is made in one folder per user (`capevolve-scratch-<uid>` in the "
        "temporary folder), hidden from every child and each granted its own inside, so a sibling's "
        "cannot be listed or read even by its path; and a confined process gives up every capability "
        "(with `no_new_privs`, for good), so root's children read no other's environment. The nulls' "
        "spread stays the honest run's, 0.1000 (hiding the folder is what holds this replay: without it "
        "the spread is 0.0000 again; without the capabilities given up, 0.1000). `PR_SET_DUMPABLE` was "
        "tried: it does not stop a reader holding those capabilities, and Landlock stops one without them"
    ),
    unconfined="not held: unconfined, every scratch folder is readable",
)
@pytest.mark.confined  # unconfined every scratch folder is readable: the row says so
def test_a_best_whose_runs_share_their_draws_through_scratch_folders_lowers_no_floor(
    example, projects, capevolve
):
    honest = _gate_a_noop(example, projects, capevolve, "honest", "")
    sharing = _gate_a_noop(
        example, projects, capevolve, "sharing", SHARE_DRAWS.replace("{FOLDERS}", IN_SCRATCH)
    )
    assert honest["c7"]["decision"] == "reject"
    assert _spread(sharing) == _spread(honest), (_spread(honest), _spread(sharing))
    assert sharing["c7"]["decision"] == "reject", sharing["c7"]["reason"]


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "the same sharing of draws through a folder every child may write: `/dev/shm` (shared memory, "
        "writable to every child, since multiprocessing makes its semaphores there). The nulls' spread "
        "falls from 0.1000 to 0.0000 (1 trial, 40 val tasks; noisy_agent, the suite's fixed secret)"
    ),
    outcome=(
        "**not held**: the children of one session can still reach each other through what the kernel "
        "boundary leaves shared — `/dev/shm`, UDP on localhost (Landlock governs TCP only: binding a TCP "
        "port is refused since session 31, connecting is not), System V IPC, advisory locks and the times "
        "of files they can name, a server outside the machine both can reach. A null floor is honest only "
        "against code that does not coordinate through such channels; closing them takes namespaces of "
        "their own (IPC, mount, network) for each child, a design question for the lead"
    ),
    unconfined="not held, the same way",
    note="xfail, strict",
)
@pytest.mark.confined  # unconfined too the code reaches as much: the row says what the boundary leaves open
@pytest.mark.xfail(strict=True, reason="the children of one session share /dev/shm, UDP and System V IPC")
def test_a_best_whose_runs_share_their_draws_through_shared_memory_lowers_no_floor(
    example, projects, capevolve, tmp_path
):
    shared = Path("/dev/shm") / f"capevolve-arms-{tmp_path.name}-{os.getpid()}"
    code = SHARE_DRAWS.replace("{FOLDERS}", IN_SHARED_MEMORY.replace("SHARED", repr(str(shared))))
    try:
        honest = _gate_a_noop(example, projects, capevolve, "honest", "")
        sharing = _gate_a_noop(example, projects, capevolve, "sharing", code)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert _spread(sharing) == _spread(honest), (_spread(honest), _spread(sharing))
    assert sharing["c7"]["decision"] == "reject", sharing["c7"]["reason"]


# appended to the best's tools/reply.py: what a run of the best's bytes finds of the best's own record of
# its task and trial, by name (the run dir is hidden: nothing in it can be listed or opened)
LOOK_FOR_THE_BESTS_RECORD = """
import json as _json, os as _os, pathlib as _pathlib, sys as _sys

def _look():
    frame, task = _sys._getframe(2), None
    while frame is not None and task is None:
        found = frame.f_locals.get("task")
        task = getattr(found, "id", None)
        frame = frame.f_back
    here = _pathlib.Path(__file__).resolve()
    run = next(p for p in here.parents if p.parent.name == "runs")
    try:
        size = _os.stat(run / "rollouts" / "val" / f"{task}__seed__t0.json").st_size
    except OSError as exc:
        size = type(exc).__name__
    with (_pathlib.Path(_os.environ["SPY_TO"]) / "looked.jsonl").open("a") as out:
        out.write(_json.dumps({"file": str(here), "task": task, "bests_record": size}) + "\\n")

_look()
"""


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "the best's code, run as a null control, looks for the best's own record of its task and trial "
        "by name (`rollouts/val/<task>__<best>__t<k>.json` until session 31: the run dir is found from its "
        "folder's path; Landlock governs opening and listing, not `stat`): it was found in each of 80 null "
        "rollouts, in none of the best's 40, so a run of the best's bytes knew whether the best already "
        "ran it, and the record's size, which moves with the best's output and feedback"
    ),
    outcome=(
        "held: a rollout file is `<task>__<name>.json`, `<name>` a MAC of its split, tag, trial and task "
        "under a key derived from the run's secret (`secret/order.key`, hidden from candidate code), so no "
        "run can name another's record (nor list the folder); found in none of the 120 rollouts. A run an "
        "older version made is refused where a file or a snapshot is named (`--capevolve-new-run`)"
    ),
    unconfined="not held: unconfined, code reads the run's secret and lists the folder",
)
@pytest.mark.confined  # unconfined the code can read the secret and list the folder: the row says so
def test_a_null_control_cannot_see_the_bests_record_of_its_task(example, projects, capevolve):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    (observed,) = projects.writable(project, "observed")
    noop = project / "candidates" / "noop"
    shutil.copytree(project / "capability", noop)
    (noop / "prompt.md").write_text((noop / "prompt.md").read_text() + "\n")
    with (project / "capability" / "tools" / "reply.py").open("a") as handle:
        handle.write(LOOK_FOR_THE_BESTS_RECORD.replace('_os.environ["SPY_TO"]', repr(str(observed))))
    assert capevolve(project, "noop", gate=True).ret in (0, 10)
    looked = [json.loads(line) for line in (observed / "looked.jsonl").read_text().splitlines()]
    snapshots = RunDir(projects.run_dir(project)).snapshots
    found = {}
    for arm in ("seed", "seed-null1", "seed-null2"):
        folder = f"{snapshots.snapshot_dir(arm).resolve()}/"
        found[arm] = [isinstance(r["bests_record"], int) for r in looked if r["file"].startswith(folder)]
    assert all(len(runs) == 40 for runs in found.values()), {arm: len(runs) for arm, runs in found.items()}
    # a null control must not tell itself from the best: it finds the best's record as often as the best does
    assert sum(found["seed-null1"]) + sum(found["seed-null2"]) == 2 * sum(found["seed"]), found
