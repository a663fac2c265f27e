"""The handover that reaches the next round (issue 26, items 1 and 2), end to end on toy_calc:

- a hill-climb whose scripted optimizer records the handover files it finds in its work copy
  shows, in round N, what rounds 1…N−1 wrote in their journals, with their verdicts, and the
  diff of what they refuted; its journal never makes byte-identical edits look different;
- a leaking round (a test id written into the capability, read from splits.json like an agent
  with a shell would) never puts a test id into a later round's handover;
- the agent loop's `capevolve work new` gets the same handover;
- the optimizer's `{"cost_usd": …, "tokens": …}` line is booked: `max_usd` stops the loop on
  proposer + rollouts, and report.md's $ counts hill-climb's and `capevolve commit`'s bookings.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cli_calls import hill_climb, run

from pytest_capevolve._confine.landlock import abi
from pytest_capevolve._store.rundir import RunDir

PY = sys.executable
HANDOVER = ("JOURNAL.md", "LEDGER.md", "PROCESS.md", "RUNMAP.md", "rejected.jsonl")

# The scripted optimizer: copies every handover file it finds in the work copy to
# seen/<tag>/ (what it saw), then makes round N's edit and writes its journal entry.
RECORDER = r"""
import json, shutil, sys
from pathlib import Path

workdir, prompt = Path(sys.argv[1]), Path(sys.argv[2])
n = int(workdir.name[-4:])
seen = Path("seen") / workdir.name
seen.mkdir(parents=True)
for name in ("JOURNAL.md", "LEDGER.md", "PROCESS.md", "RUNMAP.md", "rejected.jsonl"):
    if (workdir / name).is_file():
        shutil.copy(workdir / name, seen / name)
if (workdir / "prior_iterations").is_dir():
    shutil.copytree(workdir / "prior_iterations", seen / "prior_iterations")
shutil.copy(prompt, seen / "prompt.md")
capability = workdir / "prompt.md"
if n == 1:
    capability.write_text(capability.read_text() + "Mind the sign.\n")
elif n == 2:
    capability.write_text(capability.read_text() + "Multiply carefully.\n")
elif n == 3:  # an agent with a shell reads the splits and writes a test id into its edit
    splits = json.loads(next(Path(".capevolve/runs").glob("*/splits.json")).read_text())
    leaked = sorted(splits["test"])[0]
    Path("leaked.txt").write_text(leaked)
    capability.write_text(capability.read_text() + f"When asked {leaked}, answer carefully.\n")
# round 4 changes nothing but its journal: its bytes are the parent's, a repeat
with (workdir / "JOURNAL.md").open("a") as journal:
    journal.write(f"## Iteration {workdir.name}\nMARK-{n}: round {n} notes.\n")
print(json.dumps({"cost_usd": 0.1, "tokens": 1000 * n}))
"""


def run_dir(project: Path) -> Path:
    return sorted((project / ".capevolve" / "runs").iterdir())[-1]


def seen_text(folder: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.attack(
    "laundering",
    attack=(
        "a test id written into an edit (read from `splits.json`), so the leak refusal and the refused "
        "diff confirm it to the next round"
    ),
    outcome="prevented: every handover file and the prompt blank each test id",
)
@pytest.mark.unconfined
def test_round_n_sees_rounds_before_it_their_verdicts_and_refuted_diffs_and_no_test_id(example, capsys):
    """Unconfined on purpose: round 3 stands in for an agent with a shell that reads the splits in
    .capevolve/ and writes a test id into its edit, which a confined optimizer cannot read (the run
    dir is hidden from it); the leak guard is what holds where the kernel offers no boundary."""
    project = example("toy_calc")
    spec = project / "capevolve.yaml"
    # toy_calc's ids are q00…q23; α one-shot per decision, so the second decision can accept
    spec.write_text(spec.read_text() + "leak_guard_min_length: 3\ngate_alpha_schedule: constant\n")
    (project / "recorder.py").write_text(RECORDER)
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", f"{PY} recorder.py {{workdir}} {{prompt}}", "--max-iterations", "4"
    )
    assert code == 0, err
    assert [(r["decision"], r["basis"]) for r in summary["iterations"]] == [
        ("reject", "gate"),  # the sign rule moves 2 tasks: not enough
        ("accept", None),  # the multiply rule moves 6
        ("indecisive", "leak"),  # a test id in the capability: refused, never scored
        ("reject", "repeat"),  # only its journal changed: the parent's bytes, booked unpaid
    ]
    seen = project / "seen"
    journals = {n: (seen / f"cand_000{n}" / "JOURNAL.md").read_text() for n in (1, 2, 3, 4)}
    assert "None yet" in journals[1] and "MARK-" not in journals[1]
    # round N shows what rounds 1…N−1 wrote, once each, under its verdict — and nothing later
    for n in (2, 3, 4):
        for earlier in range(1, 5):
            assert journals[n].count(f"MARK-{earlier}:") == (1 if earlier < n else 0), (n, journals[n])
    assert re.search(r"### cand_0001: reject \(gate\) vs seed \(Δ̄=\+0\.\d{4}, p=[0-9.]+\)", journals[4])
    assert "### cand_0002: accept vs seed" in journals[4]
    assert "### cand_0003: indecisive (leak) vs cand_0002" in journals[4]
    # what round 1 refuted, as the change itself: in rejected.jsonl and prior_iterations/
    rejected = [json.loads(line) for line in (seen / "cand_0004" / "rejected.jsonl").read_text().splitlines()]
    assert rejected[0]["tag"] == "cand_0001" and "+Mind the sign." in rejected[0]["diff"]
    assert rejected[0]["diff"].startswith("--- seed/prompt.md\n+++ cand_0001/prompt.md")
    prior = seen / "cand_0004" / "prior_iterations"
    assert sorted(p.name for p in prior.iterdir()) == ["cand_0001", "cand_0002", "cand_0003"]
    assert "+Mind the sign." in (prior / "cand_0001" / "diff.patch").read_text()
    assert (prior / "cand_0001" / "verdict.txt").read_text().startswith("cand_0001: reject (gate) vs seed")
    # its own entry, frozen at its decision with its heading escaped (no entry forges structure)
    assert (prior / "cand_0002" / "JOURNAL.md").read_text().startswith("\\## Iteration cand_0002\nMARK-2:")
    for n in (1, 2, 3, 4):
        assert {p.name for p in (seen / f"cand_000{n}").iterdir()} >= set(HANDOVER)
    process = (seen / "cand_0004" / "PROCESS.md").read_text()
    assert "reject (repeat)" in process and '"cost_usd"' in process
    runmap = (seen / "cand_0004" / "RUNMAP.md").read_text()
    assert "`prior_iterations/<tag>/` (here)" in runmap
    # the run dir's rows are out of a confined optimizer's reach: the map says what reads them
    assert "cannot\nopen: inside `capevolve agent`, read them through its commands" in runmap
    # the journal is not the candidate: round 4's bytes are cand_0002's whatever it wrote
    decision = rundir_decision(project, "cand_0004")
    assert "byte-identical to 'cand_0002'" in decision["note"]
    # no test id reaches a later round, though round 3 wrote one into its edit
    leaked = (project / "leaked.txt").read_text()
    verdict = json.loads((run_dir(project) / "verdicts" / "cand_0003.json").read_text())
    # the refusal, printed where the optimizer reads, does not name the test id it caught
    assert leaked not in verdict["reason"] and "holds the id of a test task" in verdict["reason"]
    assert (
        f"+When asked {leaked}" in (run_dir(project) / "hill_climb" / "cand_0003" / "diff.patch").read_text()
    )
    test_ids = json.loads((run_dir(project) / "splits.json").read_text())["test"]
    shown = seen_text(seen / "cand_0004")
    assert "When asked [a test task], answer carefully." in shown  # the refused diff, blanked
    assert not [t for t in test_ids if re.search(rf"(?<!\w){t}(?!\w)", shown, re.IGNORECASE)]
    assert not (run_dir(project) / "rollouts" / "test").exists() or not any(
        (run_dir(project) / "rollouts" / "test").iterdir()
    )


def rundir_decision(project: Path, tag: str) -> dict:
    events = [json.loads(line) for line in (run_dir(project) / "events.jsonl").read_text().splitlines()]
    return next(e for e in events if e["kind"] == "decision" and e["tag"] == tag)


COSTING = r"""
import json, subprocess, sys
code = subprocess.call([sys.executable, "optimizer.py", *sys.argv[1:]])
print("working...")
print(json.dumps({"cost_usd": 0.1, "tokens": 1000}))
sys.exit(code)
"""


def test_the_agent_loop_gets_the_handover_and_max_usd_counts_what_every_proposer_booked(
    example, capevolve, capsys
):
    project = example("toy_calc")
    spec = project / "capevolve.yaml"
    # one α schedule for the agent's gate session and hill-climb's (a run freezes it)
    spec.write_text(spec.read_text() + "max_usd: 0.35\ngate_alpha_schedule: constant\n")
    assert run(capsys, "baseline", str(project))[0] == 0
    # an agent's round: capevolve work new, an edit, a journal entry, a gate, a commit with its cost
    code, out, _ = run(capsys, "work", "new", "a1", "--project", str(project))
    assert code == 0
    a1 = Path(json.loads(out)["path"])
    assert {p.name for p in a1.iterdir()} >= {*HANDOVER, "prior_iterations", "prompt.md"}
    assert "None yet" in (a1 / "JOURNAL.md").read_text()
    process = (a1 / "PROCESS.md").read_text()
    assert "capevolve commit a1" in process
    # its gate command leaves the booking to the commit that carries the cost (a gate that
    # booked it refused that commit: "already decided"), at the schedule the run froze
    assert "--capevolve-gate --capevolve-commit none`" in process and "`constant` schedule" in process
    (a1 / "prompt.md").write_text((a1 / "prompt.md").read_text() + "Mind the sign.\n")
    with (a1 / "JOURNAL.md").open("a") as journal:
        journal.write("## Iteration a1\nAGENT-MARK: the sign rule alone.\n")
    gated = capevolve(project, a1, gate=True, extra=["--capevolve-commit", "none"])
    assert gated.ret == 10, gated.stdout.str()
    booked = ["--decision", "reject", "--reject-basis", "gate", "--optimizer-usd", "0.2"]
    code, _, err = run(
        capsys, "commit", "a1", "--project", str(project), *booked, "--optimizer-tokens", "700"
    )
    assert code == 0, err
    # the next work copy carries a1's journal with its verdict, and its refuted diff
    code, out, _ = run(capsys, "work", "new", "a2", "--project", str(project))
    a2 = Path(json.loads(out)["path"])
    journal = (a2 / "JOURNAL.md").read_text()
    assert "### a1: reject (gate) vs seed" in journal and "AGENT-MARK: the sign rule alone." in journal
    assert "+Mind the sign." in (a2 / "prior_iterations" / "a1" / "diff.patch").read_text()
    assert "+Mind the sign." in json.loads((a2 / "rejected.jsonl").read_text().splitlines()[0])["diff"]

    # hill-climb books its optimizer's $ and tokens: the cap counts a1's $0.20 and each round's $0.10
    (project / "costing.py").write_text(COSTING)
    optimizer = f"{PY} costing.py {{workdir}} {{prompt}}"
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", optimizer, "--focus", "cyclic", "--max-iterations", "5"
    )
    assert code == 0, err
    rounds = len(summary["iterations"])
    assert summary["stopped"].startswith("spend: ") and "max_usd" in summary["stopped"], summary["stopped"]
    # max_usd, not --max-iterations 5, ended the loop: $0.20 booked before it, $0.10 a round
    assert rounds in (1, 2), summary["iterations"]
    state = json.loads((run_dir(project) / "state.json").read_text())
    assert abs(state["spent"]["optimizer_usd"] - (0.2 + 0.1 * rounds)) < 1e-9
    assert state["spent"]["optimizer_tokens"] == 700 + 1000 * rounds
    assert state["spent"]["optimizer_usd"] >= 0.35 or "does not fit" in summary["stopped"]
    ledger = (run_dir(project) / "LEDGER.md").read_text()
    assert re.search(r"^\| cand_0001 \|.*\| 0\.1000 \|", ledger, re.MULTILINE)
    # hill-climb's first round read the agent's round too
    first = (run_dir(project) / "hill_climb" / "cand_0001" / "JOURNAL.md").read_text()
    assert "### a1: reject (gate) vs seed" in first and "AGENT-MARK" in first
    # report.md's $: the runner's plus both proposers' (drawn again when the loop stops)
    report = (run_dir(project) / "report.md").read_text()
    total = state["spent"]["usd"] + state["spent"]["optimizer_usd"]
    assert state["spent"]["usd"] == 0  # toy_calc reports no cost: its runner $ is unknown, not free
    assert f"USD {total:.4f} (runner unmetered + optimizer" in report
    assert (
        f"optimizer {state['spent']['optimizer_usd']:.4f}, {700 + 1000 * rounds} optimizer tokens" in report
    )


NONSENSE = r"""
print('{"cost_usd": -5, "tokens": 10}')
"""


@pytest.mark.attack(
    "laundering",
    attack="an optimizer reporting a negative or NaN cost to give back the budget its rollouts used",
    outcome="refused in one line, never booked",
)
def test_a_nonsense_cost_is_refused_in_one_line_and_never_booked(example, capsys):
    project = example("toy_calc")
    (project / "nonsense.py").write_text(NONSENSE)
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", f"{PY} nonsense.py {{workdir}}", "--max-iterations", "1"
    )
    assert code == 2 and summary is None
    line = err.strip().splitlines()[-1]
    assert "optimizer.stdout line 1" in line and "cost_usd=-5 is not a spend" in line, err
    state = json.loads((run_dir(project) / "state.json").read_text())
    assert state["iterations"] == 0 and state["spent"].get("optimizer_usd", 0.0) == 0.0
    assert not (run_dir(project) / "hill_climb" / "cand_0001" / "optimizer.json").exists()


REWRITER = r"""
import json, subprocess, sys
from pathlib import Path

code = subprocess.call([sys.executable, "optimizer.py", *sys.argv[1:]])
# a daemon that outlives the optimizer: once the loop writes optimizer.json (the proposal is
# complete), it rewrites the reported cost to $0 before the decision is booked
marker = Path("rewritten.flag").resolve()
daemon = '''
import json, sys, time
from pathlib import Path
runs, marker = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    for path in runs.glob("*/hill_climb/cand_0001/optimizer.json"):
        data = json.loads(path.read_text())
        data.update(cost_usd=0.0, tokens=0)
        path.write_text(json.dumps(data))
        marker.write_text("done")
        sys.exit(0)
    time.sleep(0.005)
'''
subprocess.Popen([sys.executable, "-c", daemon, str(Path(".capevolve/runs").resolve()), str(marker)],
                 start_new_session=True)
print(json.dumps({"cost_usd": 0.3, "tokens": 3000}))
sys.exit(code)
"""

# the candidate's rollouts wait for the optimizer's daemon to have done its part (FLAG exists), so it
# lands before the decision is booked, whatever the machine's load
WAITING = """

class WaitingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        import time as _time

        flag = FLAG
        deadline = _time.monotonic() + 120
        while "cand_" in str(ctx) and not flag.exists() and _time.monotonic() < deadline:
            _time.sleep(0.005)
        return super().run_target(task, ctx, seed=seed)
"""


@pytest.mark.attack(
    "harness",
    attack=(
        "a daemon left by the optimizer rewriting `hill_climb/<tag>/optimizer.json` to $0 between the "
        "proposal and its booking, to escape `max_usd`"
    ),
    outcome="prevented: the reported cost is logged when the proposal is complete and booked from the log",
)
@pytest.mark.unconfined
def test_the_optimizers_cost_is_booked_from_the_log_not_from_optimizer_json(
    example, projects, capsys
) -> None:
    """The loop's red team: a daemon left by the optimizer rewrote ``optimizer.json`` to $0
    between the proposal and its booking; the loop booked $0 and ``max_usd`` never saw it.

    Unconfined on purpose: a confined optimizer's daemon cannot write the run dir at all; booking
    from the log is what holds where the kernel offers no boundary."""
    project = example("toy_calc")
    projects.add_adapter(
        project,
        WAITING.replace("FLAG", 'Path(__file__).with_name("rewritten.flag")'),
        "adapter.py:WaitingAdapter",
    )
    (project / "rewriter.py").write_text(REWRITER)
    optimizer = f"{PY} rewriter.py {{workdir}} {{prompt}}"
    code, summary, err = hill_climb(capsys, project, "--optimizer", optimizer, "--max-iterations", "1")
    assert code == 0, err
    assert (project / "rewritten.flag").is_file()  # the daemon did rewrite it, before the booking
    folder = run_dir(project) / "hill_climb" / "cand_0001"
    assert json.loads((folder / "optimizer.json").read_text())["cost_usd"] == 0.0
    state = json.loads((run_dir(project) / "state.json").read_text())
    assert (
        state["spent"]["optimizer_usd"] == pytest.approx(0.3) and state["spent"]["optimizer_tokens"] == 3000
    )


DECOY = r"""
import subprocess, sys
from pathlib import Path

work, out = Path(sys.argv[1]).resolve(), Path(sys.argv[3])
(work / "prompt.md").write_text((work / "prompt.md").read_text() + "Be polite.\n")  # the diff it shows
# a daemon left running, confined like the optimizer: once the gate session of its work copy starts
# (after the loop took the diff), it writes the edit that wins into the work copy
daemon = '''
import os, sys, time
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    time.sleep(0.002)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():  # its own command line holds both words: not the gate
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--capevolve-gate" in cmd and str(work).encode() in cmd:
            try:
                (work / "prompt.md").write_text("Multiply carefully.\\n")
                said = "written"
            except OSError as exc:
                said = type(exc).__name__
            (out / "daemon.txt").write_text(said)
            sys.exit(0)
'''
subprocess.Popen([sys.executable, "-c", daemon, str(work), str(out)], start_new_session=True)
"""


@pytest.mark.attack(
    "kernel-boundary",
    attack=(
        "hill-climb's optimizer exits with a decoy edit (`+Be polite.`), leaving a daemon that writes the "
        "edit that wins into its work copy once the gate session starts: the gate accepted bytes that "
        "`diff.patch`, the journal and later rounds' prompts never showed"
    ),
    outcome=(
        "prevented: the work copy is made a new folder once the optimizer exits, which the daemon's "
        "boundary does not hold (EACCES); what is gated is what the diff shows"
    ),
    unconfined="not held: an unconfined daemon writes anything (the run is labelled unconfined)",
)
@pytest.mark.confined
@pytest.mark.skipif(abi() < 1, reason="this kernel offers no Landlock")
def test_a_daemon_left_by_the_optimizer_cannot_rewrite_the_proposal_before_its_gate(
    example, projects, capsys, tmp_path
) -> None:
    project, out = example("toy_calc"), tmp_path / "out"
    out.mkdir()
    flag = f"Path({str(out)!r}) / 'daemon.txt'"
    projects.add_adapter(project, WAITING.replace("FLAG", flag), "adapter.py:WaitingAdapter")
    (project / "decoy.py").write_text(DECOY)
    optimizer = f"{PY} decoy.py {{workdir}} {{prompt}} {out}"
    code, summary, err = hill_climb(
        capsys, project, "--optimizer", optimizer, "--max-iterations", "1", "--writable", str(out)
    )
    assert code == 0, err
    assert (out / "daemon.txt").read_text() == "PermissionError"  # it tried, after the diff was taken
    gated = (RunDir(run_dir(project)).snapshots.snapshot_dir("cand_0001") / "prompt.md").read_text()
    assert gated.endswith("Be polite.\n") and "Multiply carefully" not in gated
    assert "+Be polite." in (run_dir(project) / "hill_climb" / "cand_0001" / "diff.patch").read_text()
    assert summary is not None and summary["accepted"] == []
