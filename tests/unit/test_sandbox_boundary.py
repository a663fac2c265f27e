"""What a sandbox child may reach (``_engine/sandbox.py``), a real child confined to it,
and the labels every view carries (``_engine/confinement.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_capevolve import Task
from pytest_capevolve._confine.landlock import abi
from pytest_capevolve._confine.launch import CONFINEMENT_ENV
from pytest_capevolve._engine import confinement
from pytest_capevolve._engine.runner import run_and_score
from pytest_capevolve._engine.sandbox import Fence, isolated
from pytest_capevolve._project.adapter import load_adapter
from pytest_capevolve._project.spec import FROZEN_KEYS, load_spec

ADAPTER = """
import os, tempfile
from pathlib import Path
from pytest_capevolve import Rollout, Score

HERE = Path(__file__).parent

class Adapter:
    def tasks(self, split):
        return []
    def run_target(self, task, ctx, *, seed):
        seen = {"tmpdir": tempfile.gettempdir()}
        with tempfile.NamedTemporaryFile("w", delete=False) as scratch:
            scratch.write("mine")
        seen["scratch_file"] = scratch.name
        for name, attempt in (
            ("write_project", lambda: (HERE / "planted.py").write_text("x")),
            ("write_live", lambda: (HERE / "live" / "skill.md").write_text("x")),
            ("read_gold", lambda: (HERE / "data" / "gold.json").read_text()),
            ("read_candidate", lambda: (Path(ctx) / "prompt.md").read_text()),
            ("read_adapter", lambda: (HERE / "adapter.py").read_text()[:1]),
        ):
            try:
                attempt()
                seen[name] = "ok"
            except OSError as exc:
                seen[name] = exc.strerror
        return Rollout(task_id=task.id, output=seen)
    def score(self, task, rollout):
        return Score(reward=1.0)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "capability").mkdir(parents=True)
    (root / "capability" / "prompt.md").write_text("be kind")
    (root / "adapter.py").write_text(ADAPTER)
    (root / "data").mkdir()
    (root / "data" / "gold.json").write_text('{"answer": 42}')
    (root / "tasks").mkdir()
    (root / "tasks" / "all.json").write_text("[]")
    (root / "live").mkdir()
    (root / ".capevolve" / "runs" / "r1" / "snapshots" / "0123456789abcdef").mkdir(parents=True)
    spec = "adapter: adapter.py:Adapter\ncapability_path: capability\nsandbox_writable: [live]\n"
    (root / "capevolve.yaml").write_text(spec)
    return root


def test_the_fence_hides_the_run_dir_the_gold_files_and_a_shared_ledger(project) -> None:
    (project.parent / "team").mkdir()
    spec = (project / "capevolve.yaml").read_text() + "shared_ledger: ../team/ledger.jsonl\n"
    (project / "capevolve.yaml").write_text(spec)
    fence = Fence.of_spec(load_spec(project))

    assert set(fence.hidden) >= {
        project / ".capevolve",
        project / "data" / "gold.json",
        project / "tasks" / "all.json",
        project.parent / "team" / "ledger.jsonl",
    }
    assert project / "adapter.py" not in fence.hidden and project / "capability" not in fence.hidden
    snapshot = project / ".capevolve" / "runs" / "r1" / "snapshots" / "0123456789abcdef"
    boundary = fence.boundary(snapshot, project.parent / "scratch")
    assert boundary.writable == (project.parent / "scratch", project / "live")
    assert boundary.readable == (snapshot,)  # granted although it lies inside the hidden run dir


@pytest.mark.attack(
    "kernel-boundary",
    attack="a `sandbox_writable` that would open a hidden folder (the project itself, `.capevolve/`)",
    outcome="refused: no child starts; each rollout's infra error names the folder and the way on",
    unconfined="the same",
)
@pytest.mark.parametrize("folder", [".", ".capevolve/runs", ".."])
def test_a_sandbox_writable_folder_that_would_open_a_hidden_one_is_refused_naming_the_way_on(
    project, folder: str
) -> None:
    spec = (project / "capevolve.yaml").read_text().replace("[live]", f"[{folder}]")
    (project / "capevolve.yaml").write_text(spec)
    fence = Fence.of_spec(load_spec(project))

    with pytest.raises(
        ValueError, match="sandbox_writable names .*hidden from candidate code; name a folder"
    ):
        fence.boundary(project / "capability", project.parent / "scratch")


def test_sandbox_writable_is_frozen_and_left_out_of_a_lock_at_its_default(project) -> None:
    assert "sandbox_writable" in FROZEN_KEYS
    assert load_spec(project).to_lock()["sandbox_writable"] == ["live"]
    (project / "capevolve.yaml").write_text("adapter: adapter.py:Adapter\ncapability_path: capability\n")
    assert "sandbox_writable" not in load_spec(project).to_lock()  # older locks stay as they were


def _rollout(project: Path) -> tuple[dict, str | None, Path]:
    spec = load_spec(project)
    runner = isolated(load_adapter(spec.adapter, project), spec.adapter, project, spec=spec)
    try:
        scored = run_and_score(runner, Task(id="t", input=1), spec.capability_path, seed=0, split="val")
    finally:
        runner.close()
    assert scored.rollout is not None, scored.infra_error
    return scored.rollout.output, scored.confinement, Path(scored.rollout.output["tmpdir"])


@pytest.mark.confined
@pytest.mark.skipif(abi() < 6, reason="this kernel offers no Landlock with scoping (ABI >= 6)")
def test_a_confined_child_writes_its_scratch_and_live_folder_only_reads_all_but_gold_and_says_so(
    project,
) -> None:
    seen, label, scratch = _rollout(project)

    assert label == f"confined (Landlock ABI {abi()})"
    assert seen["write_project"] == seen["read_gold"] == os.strerror(13)  # EACCES
    assert seen["write_live"] == seen["read_candidate"] == seen["read_adapter"] == "ok"
    assert scratch.name.startswith("capevolve-sandbox-") and seen["scratch_file"].startswith(str(scratch))
    assert not (project / "planted.py").exists()
    assert not scratch.exists()  # removed when the child ended


@pytest.mark.unconfined  # the path of a machine without Landlock
def test_without_landlock_the_same_child_runs_unconfined_and_its_rollouts_say_so(project) -> None:
    seen, label, scratch = _rollout(project)  # tests marked `unconfined` run with CAPEVOLVE_LANDLOCK=off

    assert label == "unconfined (Landlock turned off by CAPEVOLVE_LANDLOCK=off)"
    assert seen["write_project"] == seen["read_gold"] == "ok"
    assert not scratch.exists()


def test_many_rollouts_are_confined_only_when_all_were() -> None:
    confined, loose = "confined (Landlock ABI 7)", "unconfined (no Landlock on Darwin)"

    def summary(labels: list[str | None]) -> str:  # a session that ran rollouts under ``labels``
        confinement.begin()
        for label in labels:
            confinement.note(label)
        return confinement.candidate_code()

    assert summary([confined, confined]) == confined
    assert summary([confined, loose, confined]) == f"{loose} for 1 of 3 rollouts"
    assert summary([loose]) == loose
    assert summary([None]).startswith("unconfined (ran in the scoring process")
    assert summary([]).startswith("no candidate code ran in this session; this machine: ")


def test_the_optimizers_label_is_what_capevolve_agent_exported_else_that_it_did_not_start_it(
    monkeypatch,
) -> None:
    monkeypatch.delenv(CONFINEMENT_ENV, raising=False)
    assert confinement.optimizer() == "not started by capevolve agent"
    monkeypatch.setenv(CONFINEMENT_ENV, json.dumps({"confined": True, "abi": 7, "scoped": True, "why": ""}))
    assert confinement.optimizer() == "confined (Landlock ABI 7)"
    monkeypatch.setenv(
        CONFINEMENT_ENV, json.dumps({"confined": False, "abi": 0, "why": "no Landlock on Darwin"})
    )
    assert confinement.optimizer() == "unconfined (no Landlock on Darwin)"


def test_a_refused_write_or_read_names_the_way_on_and_other_errors_stay_as_they_were(project) -> None:
    fence = Fence.of_spec(load_spec(project))
    write = f"run_target raised PermissionError: [Errno 13] Permission denied: '{project / 'out.json'}'"
    read = (
        f"run_target raised PermissionError: [Errno 13] Permission denied: '{project / 'data' / 'gold.json'}'"
    )

    assert fence.explain(write).startswith(write)
    assert f"sandbox_writable names ({project / 'live'}); name the folder it writes" in fence.explain(write)
    assert "TMPDIR" in fence.explain(write)
    assert fence.explain(read).startswith(read)
    assert "is hidden from it" in fence.explain(read) and "read by tasks() and score()" in fence.explain(read)
    assert fence.explain("run_target raised ValueError: no") == "run_target raised ValueError: no"
    assert "(none yet)" in Fence.of_project(project).explain(write)
    granted = (
        f"run_target raised PermissionError: [Errno 13] Permission denied: '{project / 'live' / 'a.md'}'"
    )
    assert fence.explain(granted) == granted  # a read-only file in a granted folder: not the boundary
    (project / "live").rmdir()  # named, but missing: nothing in it could be granted
    missing = (
        f"run_target raised PermissionError: [Errno 13] Permission denied: '{project / 'live' / 'a.md'}'"
    )
    assert "names " + str(project / "live") + ", which does not exist" in fence.explain(missing)


CARELESS = """
from pathlib import Path
from pytest_capevolve import Rollout, Score

class Adapter:
    def tasks(self, split):
        return []
    def run_target(self, task, ctx, *, seed):
        (Path(__file__).parent / "observed.txt").write_text(str(seed))
        return Rollout(task_id=task.id, output="done")
    def score(self, task, rollout):
        return Score(reward=1.0)
"""


def _infra_error(project: Path) -> str | None:
    spec = load_spec(project)
    runner = isolated(load_adapter(spec.adapter, project), spec.adapter, project, spec=spec)
    try:
        return run_and_score(
            runner, Task(id="t", input=1), spec.capability_path, seed=0, split="val"
        ).infra_error
    finally:
        runner.close()


@pytest.mark.skipif(abi() < 6, reason="this kernel offers no Landlock with scoping (ABI >= 6)")
def test_a_confined_adapter_that_writes_beside_itself_is_told_to_name_sandbox_writable(project) -> None:
    (project / "adapter.py").write_text(CARELESS)

    infra = _infra_error(project)

    assert infra is not None and "PermissionError" in infra
    assert "name the folder it writes in sandbox_writable in capevolve.yaml" in infra
    # the whole way on at once: a new user met "does not exist", then "changed since run …", in turn
    assert "create it first; the changed spec starts a new run, --capevolve-new-run" in infra
    assert not (project / "observed.txt").exists()


@pytest.mark.unconfined  # the other side of the test above: the same adapter, no boundary
def test_the_same_adapter_unconfined_writes_and_is_told_nothing(project) -> None:
    (project / "adapter.py").write_text(CARELESS)

    assert _infra_error(project) is None
    assert (project / "observed.txt").read_text() == "0"
