"""The guard registry: each guard names a check and a test that exist, and a way on at every
checkpoint it runs; a finalized run's refusal is one message wherever it is met."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_capevolve import exitcodes
from pytest_capevolve._decide.basis import Basis
from pytest_capevolve._decide.verdict import INDECISIVE
from pytest_capevolve._policy import guards
from pytest_capevolve._policy.guards import GUARDS, Checkpoint, GuardRefusal
from pytest_capevolve._project.spec import Spec
from pytest_capevolve._project.way_on import LOOP_WORDS, new_run_words, own_flags, pasteable, shown

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("guard", GUARDS.values(), ids=[str(name) for name in GUARDS])
def test_each_guard_names_a_check_and_a_test_that_exist(guard: guards.Guard) -> None:
    """As pluggy's ``_verify_hook`` checks an implementation: a renamed check or test fails here."""
    assert GUARDS[guard.name] is guard and guard.name in Basis
    module, _, attrs = guard.check.partition(":")
    target: object = importlib.import_module(module)
    for attr in attrs.split("."):
        target = getattr(target, attr)
    assert callable(target)
    path, _, name = guard.test.partition("::")
    assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), guard.test


@pytest.mark.parametrize("guard", GUARDS.values(), ids=[str(name) for name in GUARDS])
def test_each_guard_says_a_way_on_at_every_checkpoint_it_runs(guard: guards.Guard) -> None:
    assert guard.checkpoints and guard.stops and guard.outcome
    named_by_check = guard.way_on == {"": ""}  # declared so: the check's message names it
    assert named_by_check or all(guard.way_on_at(at).strip() for at in guard.checkpoints)


def _run(closed: bool, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    class Sealed:
        def __init__(self, rundir: object) -> None:
            pass

        def closed(self) -> dict[str, int] | None:
            return {"tasks": 3} if closed else None

    monkeypatch.setattr(guards, "Seal", Sealed)
    return SimpleNamespace(run_id="r1", project_dir=PROJECT_DIR)


PROJECT_DIR = Path("/srv/agents/my agent")


@pytest.mark.parametrize("at", guards.FINALIZED.checkpoints)
def test_a_finalized_run_is_refused_with_one_message_and_its_way_on(
    at: Checkpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    rundir = _run(True, monkeypatch)
    with pytest.raises(GuardRefusal) as refused:
        guards.refuse_finalized(rundir, at)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("run r1 is finalized: its test split was scored")
    assert message.endswith(pasteable(guards.FINALIZED.way_on_at(at), PROJECT_DIR)) and "new run" in message
    assert "PROJECT" not in message  # the project's path, quoted: a command the user can paste
    assert "--capevolve-run '/srv/agents/my agent'" in message or "--capevolve" not in message
    assert refused.value.guard is guards.FINALIZED and refused.value.exit_code == exitcodes.REFUSED


def test_the_ways_on_name_the_command_of_their_checkpoint() -> None:
    way_on = guards.FINALIZED.way_on_at
    assert "capevolve hill-climb --new-run" in way_on(Checkpoint.HILL_CLIMB)
    assert "--capevolve-new-run" in way_on(Checkpoint.SESSION) and "merge" in way_on(Checkpoint.MERGE)
    # a commit's: the candidate's folder, named as what it is (it said `--capevolve-candidate DIR`)
    assert "--capevolve-candidate CANDIDATE_FOLDER --capevolve-gate" in way_on(Checkpoint.COMMIT)
    # a new run draws the same test tasks (the same split_seed): the project's seal refuses their second
    # scoring as held out. It said "its val and test are scored afresh there"
    assert "test are scored afresh" not in way_on(Checkpoint.COMMIT)
    assert "split_ids_file leaves out the test tasks this run scored" in way_on(Checkpoint.COMMIT)


def test_a_run_still_sealed_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    rundir = _run(False, monkeypatch)
    assert guards.finalized_said(rundir) is None  # type: ignore[arg-type]
    guards.refuse_finalized(rundir, Checkpoint.SESSION)  # type: ignore[arg-type]


def test_the_harness_guard_names_its_way_on_in_its_own_message() -> None:
    """Declared ``way_on={"": ""}``: the check's message must carry the way on itself."""
    from pytest_capevolve._project import harness

    assert guards.HARNESS_CHANGED.way_on == {"": ""}
    said = harness.refusal("r1", ["adapter.py"])
    assert "restore those files, or start a new run (--capevolve-new-run)" in said


def test_a_way_on_is_a_command_the_user_can_paste(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, trap 4: a way on said ``PROJECT`` and dropped the user's flags. The project is named
    relative to the current folder when that is shorter, and a session's refusal carries the flags
    the user gave it, capevolve's own options (and their values) left to the way on."""
    project = tmp_path / "my-agent"
    monkeypatch.chdir(tmp_path)
    assert shown(project) == "my-agent" and shown(Path("/")) == "/"
    args = ["--capevolve-run", ".", "-n", "2", "--capevolve-gate", "-o", "capevolve_gate_alpha=0.01"]
    args += ["--capevolve-candidate=c", "--capevolve-tag", "t", "-q"]
    assert own_flags(args)[0] == ["-n", "2", "-o", "capevolve_gate_alpha=0.01", "-q"]
    said = "start a new run (pytest --capevolve-run PROJECT --capevolve-new-run); or capevolve commit T"
    other = "or pytest --capevolve-run PROJECT --capevolve-split train"
    assert pasteable(other, project, args) == (
        "or pytest -n 2 -o capevolve_gate_alpha=0.01 -q --capevolve-run my-agent --capevolve-split train"
    )
    assert pasteable(said, project) == said.replace("PROJECT", "my-agent")
    # a new run's way on is the command typed (its candidates and gate too, where it said the seed
    # alone), less the run it pinned: pasted, it gates the same candidates in a new run
    pinned = [*args, "--capevolve-run-id", "r1"]
    assert pasteable(said, project, pinned) == (
        "start a new run (pytest -n 2 -o capevolve_gate_alpha=0.01 -q --capevolve-run . --capevolve-gate "
        "--capevolve-candidate=c --capevolve-tag t --capevolve-new-run); or capevolve commit T"
    )
    assert pasteable(said, project, ["--capevolve-run-id=r1", *args]) == pasteable(said, project, pinned)
    finalize = ["--capevolve-finalize", ".", "-q"]  # not a run session: its flags only
    assert pasteable(said, project, finalize) == said.replace("pytest", "pytest -q").replace(
        "PROJECT", "my-agent"
    )


def test_hill_climbs_way_into_a_new_run_is_the_command_typed() -> None:
    """A new user's trap: hill-climb's notes and its finalized refusal said ``capevolve hill-climb
    --new-run``, which, pasted, is refused for want of ``--optimizer``. Said while a hill-climb runs,
    the way on is the words typed, less the run they pinned, in a new run."""
    said = "start a new run: capevolve hill-climb --new-run"
    typed = ["hill-climb", "--optimizer", "python o.py {workdir}", "--run-id", "r1", "--resume", "-n", "2"]
    token = LOOP_WORDS.set(typed)
    try:
        pasted = pasteable(said)
        # said with the project (a refusal from below the loop): its path first, then the words typed
        named = pasteable("start a new run: capevolve hill-climb PROJECT --new-run", Path("my agent"))
    finally:
        LOOP_WORDS.reset(token)
    assert (
        pasted
        == named
        == "start a new run: capevolve hill-climb --optimizer 'python o.py {workdir}' -n 2 --new-run"
    )
    assert new_run_words(["hill-climb", "--run-id=r1", "--new-run"]) == ["hill-climb", "--new-run"]
    assert pasteable(said) == said  # outside a hill-climb: as declared


@pytest.mark.attack(
    "inputs",
    attack=(
        "a hill-climb typed with the word PROJECT among its words (a path such as `~/AI-PROJECT/app`, or "
        "`--optimizer 'agent PROJECT {workdir}'` in a project folder named `x;touch PWNED;#`): the way on "
        "into a new run, pasted, named another folder, or ran `touch PWNED`"
    ),
    outcome="prevented: PROJECT is made the project's path before the words typed are put in, quoted",
)
def test_the_word_project_in_the_words_typed_is_pasted_as_typed(tmp_path: Path) -> None:
    said = "start a new run: capevolve hill-climb --new-run"
    for project, optimizer in [
        (tmp_path / "AI-PROJECT" / "app", "agent {workdir}"),
        (tmp_path / "x;touch PWNED;#", "agent PROJECT {workdir}"),
    ]:
        typed = ["hill-climb", str(project), "--optimizer", optimizer]
        token = LOOP_WORDS.set(typed)
        try:
            pasted = pasteable(said, project)
        finally:
            LOOP_WORDS.reset(token)
        assert shlex.split(pasted.split(": ", 1)[1]) == ["capevolve", *typed, "--new-run"]


def test_hill_climbs_way_into_a_new_run_leaves_out_the_run_flags_as_abbreviated() -> None:
    """argparse takes ``--run-i r1`` for ``--run-id r1`` and ``--resu`` for ``--resume``: kept in the way
    on, pasted with ``--new-run``, they were refused (``--new-run starts a new run; --run-id continues
    an existing one``)."""
    from pytest_capevolve._cli.main import build_parser

    typed = ["hill-climb", ".", "--optimizer", "o {workdir}", "--run-i", "r1", "--resu", "-n", "2"]
    read = build_parser("hill-climb").parse_args(typed)
    assert (read.run_id, read.resume) == ("r1", True)
    words = new_run_words(typed)
    assert words == ["hill-climb", ".", "--optimizer", "o {workdir}", "-n", "2", "--new-run"]
    pasted = build_parser("hill-climb").parse_args(words)
    assert (pasted.run_id, pasted.resume, pasted.new_run) == (None, False, True)


def test_a_refusal_records_no_numbers(tmp_path: Path) -> None:
    spec = Spec(tmp_path / "capevolve.yaml", tmp_path, "adapter.py:A", tmp_path, min_coverage=0.7)
    v = guards.refusal_verdict(
        spec,
        guards.TAMPER,
        guards.Checkpoint.SCREEN,
        reason="r",
        tag="c",
        against="b",
        decision=INDECISIVE,
        details={"x": 1},
    )
    way_on = guards.TAMPER.way_on_at(guards.Checkpoint.SCREEN)
    assert (v.tag, v.against, v.decision, v.basis, v.reason, v.details) == (
        "c",
        "b",
        INDECISIVE,
        "tamper",
        f"r; {way_on}",
        {"x": 1},
    )
    assert v.n_tasks == 0 and v.p_value is None and v.delta_mean is None and v.min_coverage == 0.7
    assert v.mode == "exact" and v.alpha is None and v.regressions == [] and v.coverage == {}
    assert v.trials == 0 and v.footprint == [] and v.infra_errors == {} and v.warnings == []
