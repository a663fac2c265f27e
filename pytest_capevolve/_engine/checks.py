"""Running microcases: each check kind against one candidate folder → an :class:`Outcome`.

``score`` uses the project's adapter, never the candidate's code; ``call`` runs the candidate's
function in a subprocess (:mod:`.callcheck`), confined as a sandbox child is."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._project.adapter import Rollout, Task, check_reward, load_adapter, load_tasks
from .._project.microcase import Microcase, MicrocaseError
from .._project.spec import Spec, SpecError, load_spec
from .runner import AdapterRunner, run_and_score
from .sandbox import Fence, isolated
from .scratch import new_scratch, scratch_env


@dataclass(frozen=True)
class Outcome:
    ok: bool
    expected: str
    got: str
    # a ``call``'s process: the label of the boundary it ran in, as a rollout's (:mod:`.callcheck`);
    # "" where no candidate code ran (``text``, ``score``, a call that never started)
    confinement: str = ""

    @property
    def unconfined(self) -> str | None:
        """The label when candidate code ran outside the boundary, else None."""
        return self.confinement if self.confinement and not self.confinement.startswith("confined") else None


@dataclass
class ProjectEnv:
    """A project's spec and, loaded on first need, its adapter and task pool."""

    spec: Spec
    _runner: AdapterRunner | None = None
    _pool: dict[str, Task] = field(default_factory=dict)
    _fence: Fence | None = None

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
            self._runner = isolated(adapter, self.spec.adapter, self.spec.project_dir, spec=self.spec)
        return self._runner

    def fence(self) -> Fence:
        """The boundary every ``call`` check's process confines itself to (its project walked once)."""
        if self._fence is None:
            self._fence = Fence.of_spec(self.spec)
        return self._fence

    def close(self) -> None:
        """End the sandbox children its runner started (idempotent)."""
        if self._runner is not None:
            self._runner.close()

    def pool(self) -> list[Task]:
        """Every task the adapter returns, in its order."""
        self.runner()
        return list(self._pool.values())

    def task(self, task_id: str) -> Task:
        self.runner()
        if task_id not in self._pool:
            raise MicrocaseError(f"task {task_id!r} is not in the adapter's task pool")
        return self._pool[task_id]


def run(case: Microcase, candidate: Path, env: ProjectEnv) -> Outcome:
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


def _run_in_own_group(
    request: dict[str, Any], cwd: Path, timeout: float, fence: Fence
) -> subprocess.CompletedProcess[str]:
    """Run the call in a new process group, inside the sandbox child's boundary (it confines
    itself before it loads the candidate's file: the run dir and gold hidden, a scratch ``TMPDIR``
    its one writable folder besides the spec's ``sandbox_writable``); past ``timeout`` the whole
    group is killed, so a child the candidate's function spawned does not outlive the check (nor
    hold its pipes)."""
    argv = [sys.executable, "-P", "-m", "pytest_capevolve._engine.callcheck"]
    pipe = subprocess.PIPE
    scratch = new_scratch("capevolve-call-")
    try:
        request = {**request, "boundary": fence.boundary(cwd, Path(scratch)).as_json()}
        with subprocess.Popen(
            argv,
            stdin=pipe,
            stdout=pipe,
            stderr=pipe,
            text=True,
            cwd=cwd,
            start_new_session=True,
            env=scratch_env(scratch),
        ) as proc:
            try:
                out, err = proc.communicate(json.dumps(request), timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise
            return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_call(case: Microcase, check: dict[str, Any], candidate: Path, env: ProjectEnv) -> Outcome:
    file_part, _, name = check["function"].partition(":")
    request = {"file": file_part, "function": name, "args": check["args"], "kwargs": check["kwargs"]}
    call = f"{check['function']}(*{_short(check['args'])}, **{_short(check['kwargs'])})"
    expect_kind, wanted = next(iter(check["expect"].items()))
    expected = f"{call} {expect_kind.replace('_', ' ')} {_short(wanted)}"
    try:
        done = _run_in_own_group(request, candidate, check["timeout_s"], env.fence())
    except subprocess.TimeoutExpired:
        return Outcome(False, expected, f"no result within timeout_s={check['timeout_s']}")
    except ValueError as exc:  # a sandbox_writable that would open a hidden folder: no call runs
        return Outcome(False, expected, f"the call did not run: {exc}")
    lines = done.stdout.strip().splitlines()
    try:  # the label from the first line, written before the candidate's file loaded (callcheck.main)
        label = str(json.loads(lines[0]).get("confinement") or "")
        result = json.loads(lines[-1]) if len(lines) > 1 else {}
    except (IndexError, json.JSONDecodeError, AttributeError):
        label, result = "", {}
    if not isinstance(result, dict) or not result:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return Outcome(False, expected, f"the call process failed (exit {done.returncode}): {tail[0]}", label)
    if result.get("setup_error"):
        return Outcome(False, expected, result["setup_error"], label)
    raised = result.get("raised")
    if expect_kind == "raises":
        if raised and wanted in result.get("raised_mro", [raised]):
            return Outcome(True, "", "", label)
        got = f"{raised}: {result.get('message')}" if raised else f"returned {_short(result.get('value'))}"
        return Outcome(False, expected, got, label)
    if raised:
        return Outcome(False, expected, f"raised {raised}: {result.get('message')}", label)
    value = result.get("value")
    return Outcome(_compare(expect_kind, value, wanted), expected, _short(value), label)


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
    """Every key of ``wanted`` is in ``value`` with a matching value (recursively for mappings)."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(
            k in value and is_json_subset(v, value[k]) for k, v in wanted.items()
        )
    return bool(wanted == value)


def _expected(task: Task, wanted: tuple[float, float]) -> str:
    return f"reward in [{wanted[0]:g}, {wanted[1]:g}] for task {task.id!r}"


def _in_range(task: Task, reward: float, feedback: str, wanted: tuple[float, float]) -> Outcome:
    got = f"reward {reward:g}" + (f" ({_short(feedback, 120)})" if feedback else "")
    return Outcome(wanted[0] <= reward <= wanted[1], _expected(task, wanted), got)


def _scored(env: ProjectEnv, task: Task, rollout: Rollout, wanted: tuple[float, float]) -> Outcome:
    try:
        score = env.runner().score(task, rollout, seed=env.spec.base_seed)
        reward = check_reward(score.reward, f"score({task.id!r})")
    except Exception as exc:
        raised = f"the project's scorer raised {type(exc).__name__}: {exc}"
        return Outcome(False, _expected(task, wanted), raised)
    return _in_range(task, reward, str(score.feedback or ""), wanted)


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
    scored = run_and_score(env.runner(), task, candidate, seed=seed, split="val")
    if scored.reward is None:
        return Outcome(False, _expected(task, check["reward"]), f"an infra error: {scored.infra_error}")
    return _in_range(task, scored.reward, scored.feedback, check["reward"])


RUNNERS: dict[str, Callable[[Microcase, dict[str, Any], Path, ProjectEnv], Outcome]] = {
    "text": _run_text,
    "call": _run_call,
    "score": _run_score,
    "adapter": _run_adapter,
}
