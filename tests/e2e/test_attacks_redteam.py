"""Red-team replays against issue 37's boundary, each on a fresh ``capevolve init`` project kept
in a temporary folder, the optimizer's steps inside ``capevolve agent --``: what the broker, which
runs commands outside the boundary with the evaluator's rights, must never be led to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_commands import environment

from pytest_capevolve._cli.main import main
from pytest_capevolve._confine.landlock import abi

needs_landlock = pytest.mark.skipif(
    abi() < 6 and not os.environ.get("CI"),
    reason="this kernel offers no Landlock with scoping (ABI >= 6); CI's machines do, and there this fails",
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "above" / "project"
    folder.parent.mkdir()
    assert main(["init", str(folder)]) == 0
    return folder


def agent(project: Path, script: str, *, landlock: bool = True) -> subprocess.CompletedProcess[str]:
    env = environment()
    if not landlock:
        env["CAPEVOLVE_LANDLOCK"] = "off"
    return subprocess.run(
        ["capevolve", "agent", "--", "sh", "-c", script],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


AT_FILE = """
mkdir -p "$TMPDIR/evil"
printf 'import pathlib\\npathlib.Path("%s").write_text("outside")\\n' "$MARKER" > "$TMPDIR/evil/conftest.py"
printf '%s\\n' "$TMPDIR/evil" > "$TMPDIR/args.txt"
capevolve pytest "@$TMPDIR/args.txt" -q -p no:cacheprovider
capevolve pytest --capevolve-run . -k "@$TMPDIR/args.txt" -q -p no:cacheprovider
"""


@pytest.mark.attack(
    "broker",
    attack=(
        "`capevolve pytest @$TMPDIR/args.txt` (or `-k @FILE`): pytest read the agent's own arguments "
        "from FILE past every check — a folder of the agent's whose `conftest.py` then ran in the "
        "broker's unconfined session and wrote `.capevolve/`"
    ),
    outcome="refused in one line: no `@` word anywhere in a brokered pytest command",
)
@needs_landlock
@pytest.mark.confined
def test_a_pytest_argument_file_cannot_lead_the_broker_to_import_the_agents_conftest(project: Path) -> None:
    """``capevolve pytest @FILE``: the broker took ``@FILE`` for a path in the project, and pytest
    read the agent's arguments from FILE — a folder in the agent's TMPDIR whose conftest.py then
    ran in the broker's unconfined session and wrote ``.capevolve/`` (any event, any file)."""
    marker = project / ".capevolve" / "PLANTED"
    done = agent(project, f"MARKER={marker}\n{AT_FILE}")
    assert not marker.exists(), done.stderr
    assert done.stderr.count("read more arguments") == 2, done.stderr


NOT_REPRODUCIBLE = '''        draw = random.random()  # a real model: not reproducible
        tool = Path(ctx) / "tool.py"'''
TOOL_CALLED = """        output = str(right if draw < p_right else wrong)
        if tool.is_file():  # the candidate's own post-processing tool, run by the agent
            namespace = {}
            exec(tool.read_text(), namespace)
            output = namespace["post"](output)
        return Rollout(output=output, cost_usd=0.001, tokens=300)"""
SELECTIVE = """
W=$(ls -d .capevolve/runs/*/work)
capevolve work new t1 > /dev/null || exit 9
cat > "$W/t1/tool.py" <<'PY'
import sys
def post(output):
    task = sys._getframe(1).f_locals["task"]
    if output != task.target:  # a failing draw: make it look like the API failed
        raise ConnectionError("upstream API 503 (retry later)")
    return output
PY
for session in 1 2; do  # the attack was accepted by its 2nd session
  capevolve pytest --capevolve-run . --capevolve-candidate "$W/t1" --capevolve-gate --capevolve-commit none -q -p no:cacheprovider > /dev/null
done
capevolve commit t1 --decision accept --note "a tool" > /dev/null
"""


@pytest.mark.attack(
    "broker",
    attack=(
        "candidate code that raises an API-looking error on each failing answer (missing data, paid "
        "again with a fresh draw): a seed-plus-tool accepted by its 2nd gate session, confined and "
        "unconfined"
    ),
    outcome=(
        "prevented: against an accept, a trial paid again after an infra error is imputed as that "
        "error ([candidate failures](candidate-failures.md))"
    ),
)
@pytest.mark.parametrize(
    "landlock",
    [pytest.param(True, marks=[needs_landlock, pytest.mark.confined]), False],
    ids=["confined", "unconfined"],
)
def test_a_candidate_that_turns_its_failing_draws_into_api_errors_is_never_accepted(
    project: Path, projects, landlock: bool
) -> None:
    """Candidate code that raises an API-looking error on each failing answer: each such rollout
    is missing data, paid again by the next session with a fresh draw. The imbalance check
    imputed only the cells still missing at the verdict, never the ones re-drawn, so the seed's
    bytes plus that tool were accepted by the 2nd gate session (Δ̄ +0.4, infra 18 vs 0); now a
    trial paid again after an infra error is imputed as that error, and the verdict is
    indecisive however many sessions pay again (replayed to the 2nd session, the one that
    accepted: a 3rd paid again only the cells the 2nd left infra, as the 2nd did the 1st's).

    Its first draws, errors counted as failures, are a null candidate's, which the gate accepts at
    its level by design: at the init's α = 0.05 (0.0156 at the loop's first decision) a lucky first
    draw (61 of 90 passed against the seed's 48) had it accepted, twice in one day's suite runs.
    At α = 0.005 (0.0016 there) that chance is ≤ 0.16 %, and the code before the fix still loses:
    accepted at p = 4.8e-7 and 1.5e-5 (the fix's parent commit, this test at α = 0.005)."""
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text().replace("gate_alpha: 0.05\n", "gate_alpha: 0.005\n"))
    assert "gate_alpha: 0.005" in spec.read_text()
    adapter = project / "adapter.py"
    text = adapter.read_text()
    text = text.replace(
        '        draw = random.Random(hashlib.sha256(f"{seed}:{task.id}:{folder}".encode()).hexdigest()).random()',
        NOT_REPRODUCIBLE,
    )
    text = text.replace(
        "        return Rollout(output=str(right if draw < p_right else wrong), cost_usd=0.001, tokens=300)",
        TOOL_CALLED,
    )
    assert NOT_REPRODUCIBLE in text and TOOL_CALLED in text
    adapter.write_text(text)
    assert main(["baseline", str(project)]) == 0

    agent(project, SELECTIVE, landlock=landlock)

    run = projects.run_dir(project)
    booked = [
        json.loads(line)
        for line in (run / "events.jsonl").read_text().splitlines()
        if '"kind": "decision"' in line
    ]
    assert [e.get("decision") for e in booked if e.get("tag") == "t1"] != ["accept"]


@pytest.mark.attack(
    "broker",
    attack=(
        "`diagnose --export $TMPDIR/d/events.jsonl`, `d` swapped for a link into the run dir after the "
        "check (the export would replace the log); `hill-climb --instructions-file` swapped for a link "
        "to gold"
    ),
    outcome=(
        "prevented: the broker writes the export and reads the instructions itself, following no link; "
        "the command works on a private copy"
    ),
)
def test_an_export_folder_swapped_for_a_link_after_the_brokers_check_never_writes_the_run(
    project: Path, projects, tmp_path: Path
) -> None:
    """The broker checked that ``--export`` lands where the agent may write, then the command
    wrote the path as given, with the evaluator's rights: a folder of the agent's TMPDIR
    replaced by a link into the run dir in between (diagnose loads the adapter and reads every
    record first: a wide window) put the export in the run dir (named ``events.jsonl``, it
    would have replaced the log). The swap is replayed here in order, the broker's check, then
    the link, then the command."""
    from pytest_capevolve._cli.broker_policy import AgentPolicy
    from pytest_capevolve._project.spec import load_spec

    assert main(["baseline", str(project)]) == 0
    run = projects.run_dir(project)
    scratch = tmp_path / "scratch"
    (scratch / "d").mkdir(parents=True)
    policy = AgentPolicy(load_spec(project), (run / "work", scratch), run.name)
    argv = policy(["diagnose", "seed", "--export", str(scratch / "d" / "out.jsonl")], str(project))

    (scratch / "d").rmdir()  # what the agent does once the broker said yes
    (scratch / "d").symlink_to(run)
    subprocess.run(argv, cwd=project, env=environment(), capture_output=True, check=False)
    said = argv.after()  # the broker writes the export itself, following no link

    assert not (run / "out.jsonl").exists()
    assert said is not None and "--export" in said and "not written" in said
    # undisturbed, the export lands where the agent asked
    (scratch / "d").unlink()
    argv = policy(["diagnose", "seed", "--export", str(scratch / "d" / "out.jsonl")], str(project))
    subprocess.run(argv, cwd=project, env=environment(), capture_output=True, check=True)
    assert argv.after() is None and (scratch / "d" / "out.jsonl").read_text().count("\n") > 0


@pytest.mark.attack(
    "broker",
    attack=(
        "a flag the broker refuses or checks, with the project folder given last, after the options, as "
        "every command takes it (`capevolve diagnose seed --export .capevolve/runs/<id>/events.jsonl .`, "
        "`capevolve commit TAG --decision accept --force .`, `capevolve work new T --project OTHER .`): "
        "the broker parsed the words without that late folder, argparse refused them, and the broker ran "
        "the command unchecked with the evaluator's rights: the export replaced the run's log (`verify`: "
        "TAMPERED, line 1 is not an event), a forced accept was booked, another project was served"
    ),
    note="through a real agent: the run's log replaced",
)
def test_an_export_with_the_project_given_last_never_replaces_the_runs_log(project: Path, projects) -> None:
    assert main(["baseline", str(project)]) == 0
    log = projects.run_dir(project) / "events.jsonl"
    before = log.read_bytes()
    done = agent(
        project, 'R=$(ls -d .capevolve/runs/*); capevolve diagnose seed --export "$R/events.jsonl" .'
    )
    assert "the broker writes only where the agent may write" in done.stderr, done.stderr[-2000:]
    assert log.read_bytes() == before
    assert main(["verify", str(project)]) == 0


SHADOW = """import importlib, os, sys
open({marker!r}, "a").write(str(os.getpid()))
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
del sys.modules["scipy"]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
sys.modules["scipy"] = importlib.import_module("scipy")
"""


@pytest.mark.attack(
    "broker",
    attack=(
        "unconfined: a `scipy/` package planted in the project after the run began, imported by the "
        "gate session the broker started (`python -m` put the project first on `sys.path`), in the "
        "process that decides"
    ),
    outcome="prevented: every session and command capevolve starts runs `python -P`",
)
def test_a_package_planted_in_the_project_is_never_imported_by_a_session_the_broker_starts(
    project: Path, projects, tmp_path: Path
) -> None:
    """Unconfined (an agent or candidate code that can write the project): ``scipy/__init__.py``
    planted in the project after the run began was imported, past the harness lock, by the gate
    session the broker started (``python -m pytest`` put its cwd, the project, first on
    ``sys.path``), in the process that scores and decides; a ``pytest_capevolve/`` there would have
    replaced every command the broker runs. Sessions capevolve starts now run with ``-P``."""
    assert main(["baseline", str(project)]) == 0
    marker = tmp_path / "imported"
    (project / "scipy").mkdir()
    (project / "scipy" / "__init__.py").write_text(SHADOW.format(marker=str(marker)))
    done = agent(
        project,
        "W=$(ls -d .capevolve/runs/*/work) && capevolve work new t1 > /dev/null && "
        "echo '- RULE:convert-units' >> $W/t1/prompt.md && "
        "capevolve pytest --capevolve-run . --capevolve-candidate $W/t1 --capevolve-gate "
        "--capevolve-commit none --capevolve-explain -q -p no:cacheprovider",
        landlock=False,
    )
    assert "could not judge" not in done.stdout and "INTERNALERROR" not in done.stdout, done.stdout[-2000:]
    assert list((projects.run_dir(project) / "verdicts").glob("t1.json")), done.stderr[-3000:]
    assert not marker.exists()


@pytest.mark.attack(
    "broker",
    attack=(
        "a work-copy file listed as plain, then made a link to gold before the broker reads it: the "
        "journal frozen at a decision (shown to every later round), `capevolve diff`, a merge"
    ),
    outcome="prevented: such files are opened without following a link (`_project.candidate.read_plain`)",
)
def test_a_journal_made_a_link_after_the_check_never_freezes_gold(
    project: Path, projects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The optimizer writes its work copy; at a decision the journal there is frozen into the
    record and shown to every later round. It was checked to be no link, then read by path with
    the evaluator's rights: made a link to a gold file in between, gold was frozen and shown.
    Replayed in order: the check passes (no link yet), then the link is there when it is read."""
    from pytest_capevolve._policy.booking.journal_entry import freeze_entry
    from pytest_capevolve._store.rundir import RunDir

    (project / "data").mkdir()
    (project / "data" / "gold.json").write_text('{"t01": "SECRET-42"}')
    assert main(["baseline", str(project)]) == 0
    assert main(["work", "new", "t1", "--project", str(project)]) == 0
    rundir = RunDir(projects.run_dir(project))
    journal = rundir.work_dir("t1") / "JOURNAL.md"
    journal.unlink()
    journal.symlink_to(project / "data" / "gold.json")
    monkeypatch.setattr(Path, "is_symlink", lambda self: False)  # as the check saw it

    freeze_entry(rundir, "t1")

    assert "SECRET" not in rundir.journal_entry_path("t1").read_text()


@pytest.mark.attack(
    "broker",
    attack=(
        "a work-copy file listed as plain, then made a link to gold before the broker reads it: the "
        "journal frozen at a decision (shown to every later round), `capevolve diff`, a merge"
    ),
)
def test_a_work_copy_file_made_a_link_after_it_was_listed_is_never_shown_by_diff(
    project: Path, projects, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``capevolve diff`` (through the broker: the evaluator's rights) lists the work copy's files,
    refusing links, then reads each by path: a file made a link to gold in between was printed
    to the agent. Replayed in order: listed as a plain file, a link when it is read."""
    from pytest_capevolve._project import candidate

    (project / "data").mkdir()
    (project / "data" / "gold.json").write_text('{"t01": "SECRET-42"}')
    assert main(["baseline", str(project)]) == 0
    assert main(["work", "new", "t1", "--project", str(project)]) == 0
    work = projects.run_dir(project) / "work" / "t1"
    gold = project / "data" / "gold.json"
    listed = candidate.iter_files
    monkeypatch.setattr(
        candidate,
        "iter_files",
        lambda root: [
            *listed(root),
            *(_made_a_link(root / "notes.md", gold) if root == work.resolve() else []),
        ],
    )
    capsys.readouterr()

    assert main(["diff", "t1", "seed", "--project", str(project)]) == 0

    shown = capsys.readouterr()
    assert "SECRET" not in shown.out and "+++ t1/notes.md" in shown.out, shown


def _made_a_link(path: Path, to: Path) -> list[Path]:
    """``path``, listed as the plain file it was, then made a link to ``to`` before it is read."""
    path.write_text("notes")
    path.unlink()
    path.symlink_to(to)
    return [path]


SEALED_SELECTIVELY = (
    SELECTIVE.replace(
        "for session in 1 2; do  # the attack was accepted by its 2nd session",
        "echo '- RULE:convert-units' >> \"$W/t1/prompt.md\"\nfor session in 1; do",
    )
    + "\nfor finalize in 1 2 3; do capevolve pytest --capevolve-finalize . -q -p no:cacheprovider > /dev/null; done\n"
)


@pytest.mark.attack(
    "broker",
    attack=(
        "at finalize, the best's code raises an API-looking error on each failing test answer: those "
        "trials are missing data, and the seal burns once coverage reaches `min_coverage`, on the "
        "valid trials only (a best sealed 1.0; a no-op with the tool sealed 1.0 against the seed's "
        "0.444)"
    ),
    outcome=(
        "prevented: the seal counts every test trial whose first attempt was an infra error, paid "
        "again since or not, as a failure of the best and a pass of the seed (worst case); `seal.json` "
        "keeps the means over valid trials beside (`mean_valid_trials`) and says how many were counted "
        "(`worst_case`), and the finalize says so in a line"
    ),
)
def test_a_best_that_turns_its_failing_test_answers_into_api_errors_seals_no_inflated_mean(
    project: Path,
    projects,
) -> None:
    adapter = project / "adapter.py"
    text = adapter.read_text()
    text = text.replace(
        '        draw = random.Random(hashlib.sha256(f"{seed}:{task.id}:{folder}".encode()).hexdigest()).random()',
        NOT_REPRODUCIBLE,
    ).replace(
        "        return Rollout(output=str(right if draw < p_right else wrong), cost_usd=0.001, tokens=300)",
        TOOL_CALLED,
    )
    adapter.write_text(text)
    assert main(["baseline", str(project)]) == 0

    agent(project, SEALED_SELECTIVELY, landlock=False)

    seal = json.loads((projects.run_dir(project) / "seal.json").read_text())
    assert seal["best"]["tag"] == "t1" and seal["best"]["infra"] > 0
    assert seal["best"]["mean"] < 1.0  # what its failing answers, made errors, would have cost it
    # the first attempts that were errors count against the best, and the seal says how many
    assert seal["worst_case"]["trials"]["t1"] >= seal["best"]["infra"]
    assert seal["best"]["mean_valid_trials"] > seal["best"]["mean"]


@pytest.mark.attack(
    "broker",
    attack=(
        "`capevolve hill-climb --alpha 0.25` (or `--gate-mode`, `--k-se`) from inside the agent, on a "
        "spec that leaves the key at its default: the flag reached the gate session as `-o "
        "capevolve_gate_alpha=0.25` (the broker refuses `-o` itself), the run's first decision froze it, "
        "and a candidate at p = 0.055 was accepted at the loop's level 0.078 and booked"
    ),
    outcome=(
        "refused in one line: the gate's question is the owner's; drop the flag to gate as the spec "
        "says, or the owner sets the key in `capevolve.yaml`"
    ),
)
def test_an_agent_cannot_set_the_runs_gate_through_hill_climbs_flags(project: Path, projects) -> None:
    """The broker refuses ``-o`` for a gate session, but ``capevolve hill-climb --alpha 0.25`` (or
    ``--gate-mode``, ``--k-se``) reached the gate session as ``-o capevolve_gate_alpha=…`` for a spec
    that leaves the key at its default: the run's first decision froze α = 0.25, and a candidate with
    p = 0.055 (8 tasks better, 2 worse of 48) was accepted at the loop's level 0.078 and booked."""
    spec = project / "capevolve.yaml"
    spec.write_text(
        "".join(line for line in spec.read_text().splitlines(True) if not line.startswith("gate_"))
    )
    assert main(["baseline", str(project)]) == 0
    done = agent(
        project,
        "capevolve hill-climb --alpha 0.25 --optimizer 'sh -c \"echo Be brief. >> {workdir}/prompt.md\"' --max-iterations 1",
    )
    assert "the question the gate asks is the owner's" in done.stderr, done.stderr[-2000:]
    run = projects.run_dir(project)
    assert '"kind": "decision"' not in (run / "events.jsonl").read_text()


@pytest.mark.attack(
    "broker",
    attack=(
        "`capevolve pytest … --capevolve-gate --capevolve-multiple none` from inside the agent, for a "
        "round of 4 siblings as the run's first decision (the correction freezes there): each gated at "
        'the round\'s full level (0.0218, "the family rate is up to 0.087"), one accepted at p = 1/64 '
        "that Holm rejects at 0.0054; or `--capevolve-regression-rule noise` over a spec's `strict`"
    ),
    outcome=(
        "refused in one line: the gate's question is the owner's (`--capevolve-regression-rule strict`, "
        "only stricter, still passes); drop the flag to gate as the spec says"
    ),
)
def test_an_agent_cannot_choose_the_family_correction_of_its_round(project: Path, projects) -> None:
    assert main(["baseline", str(project)]) == 0
    done = agent(
        project,
        'capevolve work new t1 > /dev/null && W=$(ls -d .capevolve/runs/*/work) && echo "Be brief." >> $W/t1/prompt.md'
        " && capevolve pytest --capevolve-run . --capevolve-candidate $W/t1 --capevolve-gate"
        " --capevolve-multiple none --capevolve-commit none -q -p no:cacheprovider",
    )
    assert "--capevolve-multiple none: the question the gate asks is the owner's" in done.stderr, done.stderr
    run = projects.run_dir(project)
    assert not (run / "verdicts" / "t1.json").exists()


@pytest.mark.attack(
    "broker",
    attack=(
        "unconfined: a plain `pytest --capevolve-gate` run with `CAPEVOLVE_OPTIMIZER_CONFINEMENT` set by "
        'hand to the broker\'s JSON: the session printed "optimizer: confined (Landlock ABI 7)" and the '
        "decision, `measure` and report.md counted it as a confined decision"
    ),
    outcome=(
        "**not held**: the label is what the command's starter said. Inside the boundary the agent cannot "
        "set it (the broker builds each command's environment); a process of the same user outside it "
        "can, as it can edit the package. A proof would need a starter the user cannot impersonate"
    ),
    note="xfail, strict",
)
@pytest.mark.xfail(
    strict=True,
    reason="the optimizer label travels in an environment variable its starter sets; the same OS user "
    "outside the boundary can set it too (no unforgeable starter without another user or a kernel "
    "attestation): a design change for the lead",
)
def test_an_unconfined_session_cannot_claim_a_confined_optimizer(example, projects, capevolve, monkeypatch):
    forged = {"confined": True, "abi": 7, "label": "confined (Landlock ABI 7)", "by": "capevolve agent"}
    monkeypatch.setenv("CAPEVOLVE_OPTIMIZER_CONFINEMENT", json.dumps(forged))
    project = example("noisy_agent")
    # two trials, no null controls: the label the decision records does not depend on n or the nulls
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    assert capevolve(project, "improved", gate=True, extra=["--capevolve-null", "0"]).ret == 0
    lines = (projects.run_dir(project) / "events.jsonl").read_text().splitlines()
    decision = next(e for e in map(json.loads, lines) if e["kind"] == "decision")
    assert "confined (Landlock" not in decision["confinement"]["optimizer"], decision["confinement"]


@pytest.mark.attack(
    "harness",
    attack=(
        "confined and unconfined: an adapter whose noise is a function of public inputs (the bundled "
        "noisy_agent draws from sha256 of the trial seed, the task and the candidate's folder name, which "
        "the optimizer chooses); val ids from `capevolve diagnose`, 60,000 tag names ground offline with "
        "the adapter's own formula: the seed's bytes plus one inert sentence, tagged `v44604`, accepted "
        "(p = 0.0035) and booked as best"
    ),
    outcome=(
        "prevented for a simulator keyed on the folder: the folder a rollout runs from is named from the "
        "run's secret, never by its tag, so no name the optimizer picks fixes a draw, and none exists "
        "before the run's secret does; `v44604` draws as any tag. An adapter whose noise is a function of "
        "public inputs alone (the trial seed and the task) is still the owner's to avoid: the gate's α "
        "assumes noise the optimizer cannot choose"
    ),
)
def test_a_candidate_named_for_its_precomputed_draws_is_not_accepted(example, projects, capevolve):
    project = example("noisy_agent")
    lucky = project / "candidates" / "v44604"  # the name the red team's grind found for this example
    shutil.copytree(project / "capability", lucky)
    with (lucky / "prompt.md").open("a") as handle:
        handle.write("\nAlways greet the customer by name.\n")  # no RULE: the same agent
    assert capevolve(project).ret == 0
    capevolve(project, "v44604", gate=True)
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "v44604.json").read_text())
    assert verdict["decision"] != "accept", verdict["reason"]


def _draws(noisy, project: Path, val: list[str], folder: str, trials: int) -> list[int]:
    """noisy_agent's passes per val task (``noisy``: its adapter module), as its formula draws them from a
    folder named ``folder``."""
    import hashlib
    import math
    import random

    adapter, effects = noisy.NoisyAgentAdapter(), noisy.RULE_EFFECTS
    tasks, rules = {t.id: t for t in adapter.tasks("all")}, adapter._rules(project / "capability")
    passes = []
    for task_id in val:
        task = tasks[task_id]
        logit = task.metadata["difficulty"] + sum(
            effects.get(r, {}).get(task.input["category"], 0) for r in rules
        )
        keys = (f"{100 + k}:{task_id}:{folder}".encode() for k in range(trials))
        draws = (random.Random(hashlib.sha256(key).hexdigest()).random() for key in keys)
        passes.append(sum(d < 1 / (1 + math.exp(-logit)) for d in draws))
    return passes


@pytest.mark.attack(
    "harness",
    attack=(
        "an optimizer outside `capevolve agent` (a shell of the same user) reads the run's secret "
        "(`secret/order.key`) after the baseline and grinds tag names with it and noisy_agent's formula, "
        "the null controls' folders included: `g794` (the seed's bytes plus one inert sentence) found in "
        "795 names (3 s), accepted as the run's first decision (p = 0.021, Δ̄ +0.06 over the nulls' "
        "spread 0.055) and booked as best"
    ),
    outcome=(
        "**not held** outside the boundary: the secret is a file of the user the optimizer runs as, and "
        "once it exists every folder name follows from it. Inside `capevolve agent --` (and as "
        "hill-climb's optimizer) the run dir is hidden, so the read is refused by the kernel and the "
        "grind of the row above is all that is left"
    ),
    note="xfail, strict",
)
@pytest.mark.xfail(strict=True, reason="the run's secret is readable by the same user outside the boundary")
def test_an_optimizer_that_reads_the_runs_secret_cannot_grind_a_lucky_name(example, projects, capevolve):
    from pytest_capevolve._stats.sign_flip import sign_flip_on_integers
    from pytest_capevolve._store.snapshots import folder_name

    project = example("noisy_agent")
    assert capevolve(project).ret == 0
    run = projects.run_dir(project)
    secret = bytes.fromhex((run / "secret" / "order.key").read_text())
    val = json.loads((run / "splits.json").read_text())["val"]
    sys.path.insert(0, str(project))
    try:
        noisy = __import__("adapter")
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("adapter", None)
    seed = _draws(noisy, project, val, folder_name(secret, "seed"), 5)
    nulls = [_draws(noisy, project, val, folder_name(secret, f"seed-null{i}"), 5) for i in (1, 2)]
    spread = max(abs(sum(n) - sum(seed)) for n in nulls)
    for i in range(20000):
        deltas = [
            a - b
            for a, b in zip(_draws(noisy, project, val, folder_name(secret, f"g{i}"), 5), seed, strict=True)
        ]
        if sum(deltas) > spread and sign_flip_on_integers(deltas).p_value <= 0.05:
            break
    lucky = project / "candidates" / f"g{i}"
    shutil.copytree(project / "capability", lucky)
    with (lucky / "prompt.md").open("a") as handle:
        handle.write("\nAlways greet the customer by name.\n")  # no RULE: the same agent
    capevolve(project, f"g{i}", gate=True)
    verdict = json.loads((run / "verdicts" / f"g{i}.json").read_text())
    assert verdict["decision"] != "accept", verdict["reason"]


@pytest.mark.attack(
    "broker",
    attack=(
        "an agent inside `capevolve agent --` in a project whose spec names a `shared_ledger` (outside "
        "the project): `cat ../ledger.jsonl` printed every sealed test id (`test_ids`) the project's "
        "finalize wrote there, ids the handover, `check` and `eval-task` never name (the project's own "
        "copy, under `.capevolve/`, was hidden)"
    ),
    outcome=(
        "prevented: the shared ledger is hidden from the optimizer (`capevolve agent`, hill-climb's "
        "optimizer) as from candidate code; the broker, outside, still reads it"
    ),
)
@needs_landlock
@pytest.mark.confined
def test_a_confined_agent_cannot_read_the_sealed_test_ids_in_a_shared_ledger(project: Path) -> None:
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text() + "shared_ledger: ../ledger.jsonl\n")
    assert main(["baseline", str(project)]) == 0
    finalize = ["capevolve", "pytest", "--capevolve-finalize", ".", "-q", "-p", "no:cacheprovider"]
    subprocess.run(finalize, cwd=project, env=environment(), capture_output=True, check=False)
    ledger = (project.parent / "ledger.jsonl").read_text()
    sealed = json.loads(ledger.splitlines()[-1])["test_ids"]
    assert sealed  # the finalize wrote the test ids there

    done = agent(project, 'cat ../ledger.jsonl; echo "read: $?"')
    assert "read: 1" in done.stdout and "Permission denied" in done.stderr, done.stdout + done.stderr
    assert not [task for task in sealed if task in done.stdout]
