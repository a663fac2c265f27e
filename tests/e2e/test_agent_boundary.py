"""``capevolve agent -- CMD``: the agent inside the optimizer's boundary cannot forge the record,
plant code where pytest would load it or read gold, while an honest agent's loop works end to end
through the broker, its decision labelled confined — or, without Landlock, unconfined; and a
hill-climb optimizer that writes outside its work copy is refused by the kernel, the loop going on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs_commands import environment

from pytest_capevolve._cli.main import main
from pytest_capevolve._confine.landlock import abi

PY = sys.executable
needs_landlock = pytest.mark.skipif(
    abi() < 6 and not os.environ.get("CI"),
    reason="this kernel offers no Landlock with scoping (ABI >= 6); CI's machines do, and there this fails",
)
confined = [
    needs_landlock,
    pytest.mark.confined,
]  # confined even under CAPEVOLVE_TEST_UNCONFINED=1 (conftest)
GOLD = '{"t01": "42"}'

ATTACK = r"""
import json, os, sys
from pathlib import Path
project = Path.cwd()
run = sorted((project / ".capevolve" / "runs").iterdir())[-1]
seen = {}
def attempt(name, action):
    try:
        action()
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = os.strerror(exc.errno) if exc.errno else str(exc)
def forge_event():
    from pytest_capevolve._store.rundir import RunDir
    RunDir(run).log.append_event("rollout", split="val", task_id="t01", tag="seed", trial=0, reward=1.0)
attempt("forge_event", forge_event)
attempt("conftest_above", lambda: (project.parent / "conftest.py").write_text("import os\n"))
attempt("setup_above", lambda: (project.parent / "setup.py").write_text(""))
attempt("edit_state", lambda: open(run / "state.json", "a").write(" "))
attempt("plant_verdict", lambda: (run / "verdicts").mkdir(exist_ok=True) or (run / "verdicts" / "t9.json").write_text("{}"))
attempt("read_gold", lambda: (project / "data" / "gold.json").read_text())
attempt("write_work", lambda: (run / "work" / "notes.txt").write_text("mine"))
print(json.dumps(seen))
"""

HONEST = """set -e
capevolve baseline > /dev/null
capevolve work new t1 > /dev/null
python optimizer.py .capevolve/runs/*/work/t1
capevolve pytest --capevolve-run . --capevolve-candidate .capevolve/runs/*/work/t1 --capevolve-gate --capevolve-commit none -q -p no:cacheprovider > /dev/null
capevolve commit t1 --decision accept --note "unit rules"
pytest --capevolve-run . -q -p no:cacheprovider || echo "direct pytest exit $?"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh `capevolve init` project with a gold file under data/, in a folder of its own."""
    folder = tmp_path / "above" / "project"
    folder.parent.mkdir()
    assert main(["init", str(folder)]) == 0
    (folder / "data").mkdir()
    (folder / "data" / "gold.json").write_text(GOLD)
    return folder


def agent(project: Path, *command: str, landlock: bool = True) -> subprocess.CompletedProcess[str]:
    env = environment()
    if not landlock:
        env["CAPEVOLVE_LANDLOCK"] = "off"
    return subprocess.run(
        ["capevolve", "agent", "--", *command],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_dir(project: Path) -> Path:
    return sorted((project / ".capevolve" / "runs").iterdir())[-1]


def events(project: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir(project) / "events.jsonl").read_text().splitlines()]


@needs_landlock
@pytest.mark.confined
def test_a_confined_agent_cannot_forge_the_log_plant_above_the_project_edit_the_run_or_read_gold(
    project: Path, tmp_path: Path
) -> None:
    assert main(["baseline", str(project)]) == 0
    log = (run_dir(project) / "events.jsonl").read_bytes()
    state = (run_dir(project) / "state.json").read_bytes()
    (tmp_path / "attack.py").write_text(ATTACK)

    done = agent(project, PY, str(tmp_path / "attack.py"))

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    denied = os.strerror(13)  # EACCES: the kernel refused, in the agent's own process
    for name in ("forge_event", "conftest_above", "setup_above", "edit_state", "plant_verdict", "read_gold"):
        assert seen[name] == denied, (name, seen)
    assert seen["write_work"] == "ok"  # its work copies are its own
    assert (run_dir(project) / "events.jsonl").read_bytes() == log
    assert (run_dir(project) / "state.json").read_bytes() == state
    assert not (project.parent / "conftest.py").exists() and not (project.parent / "setup.py").exists()
    assert "confined (Landlock ABI" in done.stderr.splitlines()[0]


@pytest.mark.parametrize(
    "landlock", [pytest.param(True, marks=confined, id="confined"), pytest.param(False, id="unconfined")]
)
def test_an_honest_agent_gates_and_commits_through_the_broker_and_the_decision_says_how_it_ran(
    project: Path, landlock: bool
) -> None:
    done = agent(project, "sh", "-c", HONEST, landlock=landlock)

    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stderr.splitlines()[0]
    decision = next(e for e in events(project) if e["kind"] == "decision")
    assert (decision["tag"], decision["decision"]) == ("t1", "accept")
    optimizer = decision["confinement"]["optimizer"]  # passed by the broker, not the agent
    verdict = json.loads((run_dir(project) / "verdicts" / "t1.json").read_text())
    assert verdict["confinement"]["optimizer"] == optimizer
    # a session started in the agent directly is refused in one line naming the brokered command
    refusal = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(refusal) == 1 and "capevolve pytest --capevolve-run ." in refusal[0]
    assert "direct pytest exit 4" in done.stdout
    if landlock:
        assert optimizer.startswith("confined (Landlock ABI") and "runs confined (Landlock ABI" in first
    else:
        assert optimizer == "unconfined (Landlock turned off by CAPEVOLVE_LANDLOCK=off)"
        assert "runs unconfined (Landlock turned off by CAPEVOLVE_LANDLOCK=off)" in first
        # one line about the agent, at start (the launcher's own is not added to it)
        assert (
            sum(
                line.startswith(("capevolve agent:", "capevolve: running"))
                for line in done.stderr.splitlines()
            )
            == 1
        )


def test_a_decision_booked_outside_any_agent_says_the_optimizer_was_not_started_by_one(project: Path) -> None:
    assert main(["baseline", str(project)]) == 0
    assert main(["work", "new", "t1", str(project)]) == 0
    work = run_dir(project) / "work" / "t1"
    (work / "prompt.md").write_text((work / "prompt.md").read_text() + "\nConvert units first.\n")
    env = environment()
    env.pop("CAPEVOLVE_OPTIMIZER_CONFINEMENT", None)
    env.pop("CAPEVOLVE_CONFINEMENT", None)
    gate = [
        PY,
        "-m",
        "pytest",
        "--capevolve-run",
        ".",
        "--capevolve-candidate",
        str(work),
        "--capevolve-gate",
    ]
    # a person's gate session books its decision itself (--capevolve-commit auto, the default)
    subprocess.run(
        [*gate, "-q", "-p", "no:cacheprovider"], cwd=project, env=env, capture_output=True, check=False
    )

    decision = next(e for e in events(project) if e["kind"] == "decision")
    assert decision["confinement"]["optimizer"] == "not started by capevolve agent"


ESCAPING_OPTIMIZER = r"""
import json, subprocess, sys
from pathlib import Path
workdir, prompt = Path(sys.argv[1]), Path(sys.argv[2])
project = Path.cwd()
run = workdir.parent.parent
tried = {}
for name, target in (("conftest_above", project.parent / "conftest.py"), ("state", run / "state.json")):
    try:
        with open(target, "a") as handle:
            handle.write("\n")
        tried[name] = "ok"
    except OSError as exc:
        tried[name] = exc.strerror
print(json.dumps(tried))
asked = subprocess.run([sys.executable, "-m", "pytest_capevolve._cli.main", "spend"], capture_output=True, text=True)
print(json.dumps([asked.returncode, asked.stderr]))
sys.exit(subprocess.call([sys.executable, "optimizer.py", str(workdir), str(prompt)]))
"""


@needs_landlock
@pytest.mark.confined
def test_a_hill_climb_optimizer_writing_outside_its_work_copy_is_refused_and_the_loop_goes_on(
    example, tmp_path: Path, capsys
) -> None:
    project = example("toy_calc")
    (tmp_path / "escape.py").write_text(ESCAPING_OPTIMIZER)

    code = main(
        ["hill-climb", str(project), "--optimizer", f"{PY} {tmp_path / 'escape.py'} {{workdir}} {{prompt}}"]
    )

    err = capsys.readouterr().err
    assert code == 0, err
    assert "the optimizer runs confined (Landlock ABI" in err
    folder = run_dir(project) / "hill_climb" / "cand_0001"
    said = (folder / "optimizer.stdout").read_text().splitlines()
    assert json.loads(said[0]) == {"conftest_above": os.strerror(13), "state": os.strerror(13)}
    # a command that reads the run says why it cannot here and what the optimizer has ("no run under …
    # yet; evaluate first" sent it to evaluate a run that exists)
    code, asked = json.loads(said[1])
    assert code == 4 and "inside a hill-climb optimizer's boundary" in asked and "no run" not in asked, asked
    assert not (project.parent / "conftest.py").exists()
    assert json.loads((folder / "optimizer.json").read_text())["confinement"].startswith("confined")
    decision = next(e for e in events(project) if e["kind"] == "decision")
    assert (decision["tag"], decision["decision"]) == ("cand_0001", "accept")  # its honest edit counted
    assert decision["confinement"]["optimizer"].startswith("confined (Landlock ABI")
