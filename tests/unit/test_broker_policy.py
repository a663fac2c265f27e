"""The broker's allowlist (``_cli.broker_policy``): what ``capevolve agent``'s broker runs for the
agent with the evaluator's rights, and the one-line refusal of everything that would let the agent
write the record, run its own code outside, or reach another project."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from pytest_capevolve._cli.broker_policy import AgentPolicy
from pytest_capevolve._cli.main import main
from pytest_capevolve._project.spec import load_spec
from pytest_capevolve.exitcodes import Refusal


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentPolicy, Path, Path]:
    tmp_path = tmp_path_factory.mktemp("broker")
    project = tmp_path / "project"
    assert main(["init", str(project)]) == 0
    work = project / ".capevolve" / "runs" / "r1" / "work"
    work.mkdir(parents=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return AgentPolicy(load_spec(project), (work, scratch), "r1"), project, work


ALLOWED = [
    ["work", "new", "t1"],
    ["commit", "t1", "--decision", "accept", "--note", "x"],
    ["spend", "--n-siblings", "2", "--table"],
    ["verify"],
    ["measure"],
    [
        "pytest",
        "--capevolve-run",
        ".",
        "--capevolve-candidate",
        ".capevolve/runs/r1/work/t1",
        "--capevolve-gate",
    ],
    ["pytest", "--capevolve-finalize", ".", "-q", "-n", "2", "-p", "no:cacheprovider", "--tb=short"],
    ["pytest", "microcases", "--capevolve-candidate=capability", "-qx", "-rA"],
    ["pytest", "--capevolve-run", ".", "--capevolve-gate", "--capevolve-regression-rule", "strict"],
    ["pytest", "--capevolve-run", ".", "--capevolve-run-id", "r1", "--capevolve-gate"],  # its own run
    ["commit", "t1", "--run-id", "r1", "--decision", "reject", "--reject-basis", "gate", "."],
]


@pytest.mark.parametrize("argv", ALLOWED, ids=lambda a: " ".join(a[:2]))
def test_the_loop_commands_of_the_playbooks_run_outside_as_asked(policy, argv: list[str]) -> None:
    check, project, _ = policy
    command = check(argv, str(project))
    assert command[0] == sys.executable and command[len(command) - len(argv) + 1 :] == argv[1:]


REFUSED = [
    (["verify", "--repair"], "rewrites the record"),
    (["commit", "t1", "--decision", "accept", "--force"], "against the gate"),
    (["verify", "--anchor-from-store", "somewhere"], "runs git"),
    (["pytest", "--capevolve-run", ".", "--capevolve-new-run", "--capevolve-gate"], "fresh level"),
    (["hill-climb", "--optimizer", "x {workdir}", "--new-run"], "fresh level"),
    (["hill-climb", "--optimizer", "x {workdir}", "--writable", "/"], "only where the agent may"),
    (["hill-climb", "--optimizer", "x {workdir}", "--alpha", "0.25"], "the question the gate asks"),
    (["hill-climb", "--optimizer", "x {workdir}", "--gate-mode", "threshold"], "the question the gate asks"),
    (["pytest", "--capevolve-run", ".", "--capevolve-gate", "--capevolve-multiple", "none"], "the owner's"),
    (["pytest", "--capevolve-run", ".", "--capevolve-regression-rule=noise"], "the owner's"),
    (["init", "elsewhere"], "not 'init'"),
    (["agent", "--", "sh"], "not 'agent'"),
    (["pytest", "--capevolve-run", ".", "-p", "evil"], "-p evil"),
    (["pytest", "--capevolve-run", ".", "--junitxml=.capevolve/runs/r1/state.json"], "--junitxml"),
    (["pytest", "--capevolve-run", ".", "-o", "capevolve_leak_guard_min_length=false"], "-o"),
    (["pytest", "--capevolve-run", ".", "--rootdir=.."], "--rootdir"),
    (["pytest", ".capevolve/runs/r1/work/t1"], "never a folder the agent may write"),
    (["pytest", "--capevolve-run", ".", "--capevolve-candidate", "/tmp"], "a work copy"),
    (["pytest", "--capevolve-run", ".."], "the project the agent was started in"),
    (["work", "new", "t1", "--project", ".."], "the project the agent was started in"),
]


@pytest.mark.attack(
    "broker",
    attack=(
        "a new run started from inside the agent (`capevolve pytest --capevolve-new-run`, `hill-climb "
        "--new-run`) for each slightly varied no-op: the same val tasks asked again at a fresh α (0.05 "
        "each, a work copy of the old run not being taken for a loop run), accepted by chance in one "
        "of enough runs"
    ),
    outcome="refused in one line: a new run is the owner's, started outside the agent",
)
@pytest.mark.parametrize("argv, why", REFUSED, ids=lambda a: " ".join(a[:3]) if isinstance(a, list) else "")
def test_what_would_write_the_record_or_run_the_agents_code_outside_is_refused(policy, argv, why) -> None:
    check, project, _ = policy
    with pytest.raises(Refusal, match=why.replace("(", r"\(")):
        check(argv, str(project))


LATE_PROJECT = [
    (["commit", "t1", "--decision", "accept", "--force", "."], "against the gate"),
    (["diagnose", "seed", "--export", ".capevolve/runs/r1/events.jsonl", "."], "only where the agent may"),
    (["work", "new", "t9", "--project", "..", "."], "the project the agent was started in"),
    (["verify", "--anchor-from-store", "somewhere", "."], "runs git"),
]


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
    outcome=(
        "refused in one line: the broker parses a command's words as the command does "
        "(`_cli.main.parse`), so every check sees every flag"
    ),
)
@pytest.mark.parametrize(
    "argv, why", LATE_PROJECT, ids=lambda a: " ".join(a[:2]) if isinstance(a, list) else ""
)
def test_a_flag_before_the_project_folder_given_last_is_checked_as_the_command_reads_it(policy, argv, why):
    check, project, _ = policy
    with pytest.raises(Refusal, match=why):
        check(argv, str(project))


OTHER_RUN = [
    [
        "pytest",
        "--capevolve-run",
        ".",
        "--capevolve-run-id",
        "r0",
        "--capevolve-candidate",
        "c",
        "--capevolve-gate",
    ],
    ["pytest", "--capevolve-run", ".", "--capevolve-run-id=r0", "--capevolve-gate"],
    ["pytest", "--capevolve-finalize", ".", "--capevolve-run-id", "r0"],
    ["commit", "t1", "--decision", "accept", "--run-id", "r0"],
    ["work", "new", "t1", "--run-id", "r0"],
    ["hill-climb", "--optimizer", "x {workdir}", "--run-id", "r0"],
]


@pytest.mark.attack(
    "broker",
    attack=(
        "from inside the agent, the current run's work copies gated in an older run of the project "
        "(`capevolve pytest … --capevolve-run-id OLD --capevolve-candidate <work copy> --capevolve-gate`; "
        "`commit`, `work new`, `hill-climb --run-id OLD`): that run's own α (frozen at `constant` by the "
        "owner's one-shot gate: each no-op variant at 0.05, booked there and carried here as a decision on "
        "its bytes) and its own seed draws (its secret names the folders); on noisy_agent, 20 no-op "
        "variants gated in such a run had one accepted in 25 % of 300 fresh secrets, one gated blind in 3 %"
    ),
    outcome=(
        "refused in one line: the broker serves the run the agent was started in; the way on drops the "
        "flag (or the owner runs it outside the agent)"
    ),
)
@pytest.mark.parametrize("argv", OTHER_RUN, ids=lambda a: " ".join(a[:2]))
def test_a_run_other_than_the_one_the_agent_was_started_in_is_refused(policy, argv) -> None:
    check, project, _ = policy
    with pytest.raises(Refusal, match="the agent works in run r1, the one it was started in; .* drop "):
        check(argv, str(project))


def test_the_diagnose_export_goes_only_where_the_agent_may_write(policy, tmp_path, monkeypatch) -> None:
    check, project, work = policy
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the broker's private copies go
    argv = check(["diagnose", "seed", "--export", str(project.parent / "scratch" / "d.jsonl")], str(project))
    assert [p.name.startswith("capevolve-broker-") for p in tmp_path.iterdir()] == [True]
    assert argv.after() is None and not list(tmp_path.iterdir())  # its private folder, gone with it
    with pytest.raises(Refusal, match="only where the agent may write"):
        check(["diagnose", "seed", "--export", ".capevolve/runs/r1/events.jsonl"], str(project))


def test_commands_run_from_the_project_never_from_a_folder_the_agent_writes(policy) -> None:
    check, project, work = policy
    (work / "t1").mkdir(exist_ok=True)
    for cwd in (work / "t1", project.parent / "scratch", project.parent):
        with pytest.raises(Refusal, match=f"cd {project}"):
            check(["spend"], str(cwd))
    assert check(["spend"], str(project / "capability"))  # a folder of the project the agent cannot write


def test_writable_takes_an_agents_state_folder_or_file_but_never_the_project_or_what_holds_it(
    policy, tmp_path
) -> None:
    from pytest_capevolve._loop.optimizer import checked_writable

    _, project, _ = policy
    spec = load_spec(project)
    state = tmp_path / "home" / ".agent"
    state.mkdir(parents=True)
    state_file = tmp_path / "home" / ".agent.json"  # a coding agent's state file beside its folder
    state_file.write_text("{}")

    assert checked_writable(spec, [state, state_file]) == (state.resolve(), state_file.resolve())
    for refused in (project, project / "capability", project.parent, tmp_path / "home" / "missing"):
        with pytest.raises(Refusal):
            checked_writable(spec, [refused])


@pytest.mark.parametrize(
    "argv",
    [
        ["pytest", "@/tmp/args.txt"],
        ["pytest", "--capevolve-run", ".", "-k", "@/tmp/args.txt"],
        ["pytest", "--capevolve-run", ".", "-m", "@args"],
    ],
    ids=["path", "value of -k", "value of -m"],
)
def test_an_argument_file_that_pytest_would_read_past_the_checks_is_refused(policy, argv) -> None:
    """Red team: ``capevolve pytest @$TMPDIR/args.txt`` passed as a path in the project, and pytest
    read ``$TMPDIR/evil`` from it, importing a conftest the agent wrote in the broker's unconfined
    session (it wrote ``.capevolve/``); argparse expands an ``@`` word anywhere, values included."""
    check, project, _ = policy
    with pytest.raises(Refusal, match="read more arguments"):
        check(argv, str(project))


@pytest.mark.attack(
    "broker",
    attack=(
        "a cwd or path (`--capevolve-run`, a collected path, `--project`) through a link in the "
        "agent's TMPDIR, pointing at the project for the check and repointed after it (to a folder "
        "with the agent's own `capevolve.yaml` and adapter)"
    ),
    outcome="refused in one line: a path that passes through a link",
)
def test_a_cwd_or_path_through_a_symlink_is_refused(policy, tmp_path: Path) -> None:
    """Red team: the broker checked where a path led, then ran the command with the path as given;
    a link in the agent's scratch, pointing at the project for the check and repointed after it,
    led the session to the agent's own folder (its own capevolve.yaml and adapter, outside)."""
    check, project, _ = policy
    link = tmp_path / "link"
    link.symlink_to(project)
    with pytest.raises(Refusal, match="symbolic link"):
        check(["verify"], str(link))
    with pytest.raises(Refusal, match="symbolic link"):
        check(["pytest", "--capevolve-run", str(link)], str(project))
    with pytest.raises(Refusal, match="symbolic link"):
        check(["pytest", str(link / "microcases")], str(project))
    with pytest.raises(Refusal, match="symbolic link"):
        check(["work", "new", "t1", "--project", str(link)], str(project))


@pytest.mark.attack(
    "broker",
    attack=(
        "`diagnose --export $TMPDIR/d/events.jsonl`, `d` swapped for a link into the run dir after the "
        "check (the export would replace the log); `hill-climb --instructions-file` swapped for a link "
        "to gold"
    ),
)
def test_an_instructions_file_is_read_by_the_broker_following_no_link(policy, tmp_path: Path) -> None:
    """Red team: ``--instructions-file`` was checked (not a gold file), then read by the command
    by path; a folder on its way swapped for a link in between led the read to gold. The broker
    now reads it itself, following no link, and the command reads a private copy."""
    check, project, _ = policy
    real = tmp_path / "real"
    real.mkdir()
    (real / "prompt.md").write_text("rules $iteration")
    argv = check(
        ["hill-climb", "--optimizer", "x {workdir}", "--instructions-file", str(real / "prompt.md")],
        str(project),
    )
    copy = Path(argv[argv.index("--instructions-file") + 1])
    assert copy != real / "prompt.md" and copy.read_text() == "rules $iteration"
    (real / "prompt.md").write_text("changed after the check")
    assert copy.read_text() == "rules $iteration"
    argv.after()  # once the command ended: the private copy is gone
    assert not copy.parent.exists()
