"""``capevolve agent -- CMD ARGS…``: a coding agent inside the optimizer's boundary, its broker
outside.

``CMD`` runs confined, holding one end of a socket pair; on the other end the broker runs each
``capevolve`` command the agent asks for that ``policy`` (:mod:`.._cli.broker_policy`) allows,
with the evaluator's rights plus the optimizer's confinement label, its output streamed back.
Without Landlock the agent runs unconfined, and every decision it books says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from .._confine.broker_wire import BROKER_ENV, Request, control_pair, requests
from .._confine.landlock import expected
from .._confine.launch import CONFINEMENT_ENV, OPTIMIZER_ENV, command, environment
from .._project.spec import Spec
from .._store.rundir import RunDir, RunDirError
from ..exitcodes import Refusal
from .optimizer import optimizer_boundary

STARTED_BY = "capevolve agent"

Policy = Callable[[list[str], str], list[str]]
"""(argv, cwd) → the command line the broker runs; raises :class:`Refusal` for what it may not."""


def current_run(spec: Spec) -> RunDir:
    """The project's current run, created (spec lock and all) when it has none yet."""
    with RunDir.project_lock(spec.project_dir):
        try:
            return RunDir.resolve(spec.project_dir, None, create=False)
        except RunDirError:
            rundir = RunDir.resolve(spec.project_dir, None, create=True)
            rundir.ensure_spec_lock(spec)
            return rundir


class Broker:
    """Runs what the agent asks, when ``policy`` allows it, with ``env`` (the evaluator's)."""

    def __init__(self, policy: Policy, env: dict[str, str], moved: Callable[[], str | None]) -> None:
        self.policy = policy
        self.env = env
        self.moved = moved  # after each command: a line when the project's current run changed
        self.running: list[threading.Thread] = []

    def serve(self, control: Iterable[Request | str]) -> None:
        for request in control:
            if isinstance(request, str):
                continue  # malformed: nobody to answer
            thread = threading.Thread(target=self.answer, args=(request,), daemon=True)
            self.running.append(thread)
            thread.start()

    def wait(self) -> None:
        for thread in self.running:
            thread.join()

    def answer(self, request: Request) -> None:
        try:
            argv = self.policy(request.argv, request.cwd)
        except Refusal as exc:
            name = " ".join(request.argv[:1]) or "(nothing)"
            request.reply.finish(
                f"error: capevolve agent refused capevolve {name}: {exc}\n", Refusal.exit_code
            )
            return
        try:
            proc = subprocess.Popen(
                argv,
                cwd=request.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the agent's Ctrl-C or exit does not cut a session short
            )
        except OSError as exc:
            if (after := getattr(argv, "after", None)) is not None:
                after()  # removes the private copies made for it
            request.reply.finish(f"error: capevolve agent could not start {argv[0]}: {exc.strerror}\n", 4)
            return
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [
            threading.Thread(target=_pump, args=(proc.stdout, request.reply.out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, request.reply.err), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        code = proc.wait()
        after = getattr(argv, "after", None)  # a file the broker writes for the agent itself
        said = after() if after is not None else None
        lines = "".join(x for x in (said, self.moved()) if x) or None
        request.reply.finish(lines, code if code >= 0 else 128 - code)


def _pump(stream: object, send: Callable[[bytes], None]) -> None:
    fd = stream.fileno()  # type: ignore[attr-defined]
    while chunk := os.read(fd, 65536):
        send(chunk)


def run_agent(
    spec: Spec,
    argv: list[str],
    *,
    policy_for: Callable[[RunDir, tuple[Path, ...]], Policy],
    also_writable: Iterable[Path] = (),
) -> int:
    """Start ``argv`` inside the boundary, serve its commands, return its exit code.
    ``policy_for(run, writable)`` builds the allowlist for that run and those writable folders."""
    rundir = current_run(spec)
    work = rundir.root / "work"
    work.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="capevolve-agent-"))
    try:
        boundary = optimizer_boundary(spec, [work, scratch], also_writable=also_writable)
        state = expected()
        print(
            f"capevolve agent: {argv[0]} runs {state.label}; it writes {work} (the run's work copies) "
            f"and {scratch} (TMPDIR, removed at the end); capevolve commands go through the broker",
            file=sys.stderr,
            flush=True,
        )
        control, inherited = control_pair()
        agent_env = {k: v for k, v in os.environ.items() if k not in (OPTIMIZER_ENV, CONFINEMENT_ENV)}
        agent_env.update({BROKER_ENV: str(inherited.fileno()), "TMPDIR": str(scratch)})
        # unconfined: started directly, the line above the only one said (the launcher would add its own)
        started = command(boundary, argv) if state.confined else argv
        if not state.confined:
            agent_env[CONFINEMENT_ENV] = json.dumps(state.as_json())
        broker_env = {k: v for k, v in os.environ.items() if k not in (BROKER_ENV, CONFINEMENT_ENV)}
        # the label the record copies: set here, not by the agent
        broker_env.update(environment(state, STARTED_BY))
        broker = Broker(policy_for(rundir, boundary.writable), broker_env, moved=_moved(spec, rundir))
        try:
            proc = subprocess.Popen(started, env=agent_env, pass_fds=(inherited.fileno(),), cwd=os.getcwd())
        except OSError as exc:
            raise Refusal(f"cannot start {argv[0]}: {exc.strerror}; give a command on PATH") from None
        finally:
            inherited.close()
        serving = threading.Thread(target=broker.serve, args=(requests(control),), daemon=True)
        serving.start()
        code = _wait(proc)
        control.shutdown(2)  # socket.SHUT_RDWR: the broker takes no new request
        serving.join()
        broker.wait()
        control.close()
        return code if code >= 0 else 128 - code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _moved(spec: Spec, started_in: RunDir) -> Callable[[], str | None]:
    """A note for the agent once the project's current run is another (a new run began): the
    boundary was drawn around the first one's work copies, and cannot grow."""

    def note() -> str | None:
        try:
            now = RunDir.resolve(spec.project_dir, None, create=False).run_id
        except RunDirError:
            return None
        if now == started_in.run_id:
            return None
        return (
            f"capevolve agent: the project's current run is now {now}; this agent writes only the work "
            f"copies of run {started_in.run_id}: end it and start it again (capevolve agent -- CMD ARGS…)\n"
        )

    return note


def _wait(proc: subprocess.Popen[bytes]) -> int:
    """The agent's exit code; a Ctrl-C reaches it too (one process group), so wait on."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue
