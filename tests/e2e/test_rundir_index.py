"""The cheap run dir: the rollout index (``index.sqlite``) and the spend read from the log.

The index is a cache of the rollout files: it must answer exactly what the files say, be rebuilt
(with a notice, never a crash) when deleted or damaged, be caught out by ``capevolve verify`` when
edited, and the gate and ``measure`` must answer the same with and without it. The spend is not
written per rollout: it must still equal the rollouts on disk after a ``kill -9``.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from rollout_outcomes import outcomes

from pytest_capevolve._cli.main import main  # numpy and scipy load once, here
from pytest_capevolve._store.log.sealed_summary import SUMMARY_NAME
from pytest_capevolve._store.readers.audit import audit
from pytest_capevolve._store.rundir import RunDir

SPENDING = '''

import os
import signal as _signal


class SpendingAdapter(ToyCalcAdapter):
    """Costs 0.01 per rollout and kills the session's process at the 15th call, from score(),
    which runs in it (a confined sandbox child cannot signal it)."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        rollout.cost_usd = 0.01
        return rollout

    def score(self, task, rollout):
        log = Path(__file__).with_name("calls.log")
        with log.open("a") as handle:
            handle.write(task.id + "\\n")
        if len(log.read_text().splitlines()) == 15 and os.environ.get("KILL_AT_15"):
            os.kill(os.getpid(), _signal.SIGKILL)
        return super().score(task, rollout)
'''


def test_spend_after_kill_9_mid_run_equals_the_rollouts_on_disk(
    example, projects, capevolve, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = example("toy_calc")
    projects.add_adapter(project, SPENDING, "adapter.py:SpendingAdapter")
    monkeypatch.setenv("KILL_AT_15", "1")
    killed = capevolve(project, "careful", subprocess=True, timeout=300)
    assert killed.ret == -signal.SIGKILL
    root = projects.run_dir(project)
    on_disk = list((root / "rollouts").rglob("*.json"))
    assert len(on_disk) == 14
    rundir = RunDir(root)
    spent = rundir.state.read_state()["spent"]
    assert spent["metric_calls"] == 14 and spent["usd"] == pytest.approx(0.14)
    assert outcomes(rundir.rollouts.indexed_rollouts("val")) == outcomes(rundir.rollouts.rollouts("val"))
    assert audit(rundir) == []

    monkeypatch.delenv("KILL_AT_15")
    resumed = capevolve(project, "careful")  # kills nothing: in process
    assert resumed.ret == 0, resumed.stdout.str()
    resumed.stdout.fnmatch_lines(["rollouts: 10 paid, 14 reused*"])
    state = json.loads((root / "state.json").read_text())  # flushed at the end of the session
    assert state["spent"]["metric_calls"] == 24 and state["spent"]["usd"] == pytest.approx(0.24)


def test_gate_and_measure_answer_the_same_without_the_index(example, projects, capevolve, capsys) -> None:
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True, extra=["--capevolve-commit", "none"]).ret in (0, 10)
    root = projects.run_dir(project)

    def answers() -> tuple[str, str]:
        capsys.readouterr()
        main(["gate", "careful", "--against", "seed", "--project", str(project), "--json"])
        gate = capsys.readouterr().out.splitlines()[-1]
        assert main(["measure", str(project), "--no-finalize"]) == 0
        measured = "\n".join(
            line for line in capsys.readouterr().out.splitlines() if "index.sqlite" not in line
        )
        return gate, measured

    with_index = answers()
    assert json.loads(with_index[0])["tag"] == "careful"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{root / 'index.sqlite'}{suffix}").unlink(missing_ok=True)
    assert answers() == with_index  # the sealed summary serves: the index is not even read
    (root / SUMMARY_NAME).unlink()
    assert answers() == with_index
    assert (root / "index.sqlite").is_file()  # rebuilt
