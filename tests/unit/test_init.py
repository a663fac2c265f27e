"""``capevolve init``: a new project's files, never written over an existing one; a cap-evolve
project is ``import-cap-evolve``'s (``--from-cap-evolve`` names it). (That the project checks, gates and seals
offline is played by tests/e2e/test_newcomer_path.py from the tutorial.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.scaffold import FILES
from pytest_capevolve._project.spec import load_spec


def test_init_writes_a_project_whose_spec_loads_and_names_its_next_commands(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path / "new"), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert sorted(answer["files"]) == sorted(FILES)
    spec = load_spec(tmp_path / "new")
    assert spec.capability_path == tmp_path / "new" / "capability" and spec.protected_paths == ("default",)
    assert (tmp_path / "new" / "candidates" / "convert-units" / "prompt.md").is_file()
    adapter = (tmp_path / "new" / "adapter.py").read_text()
    assert all(f"def {name}(self" in adapter for name in ("tasks", "run_target", "score"))
    assert answer["next"][1:] == ["capevolve check", "capevolve baseline"]


def test_init_never_overwrites_a_file_and_writes_nothing_when_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "capevolve.yaml").write_text("mine\n")
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never overwrites" in err[0] and "capevolve.yaml" in err[0]
    assert "name a new folder (capevolve init ANOTHER)" in err[0]  # the way on
    assert (tmp_path / "capevolve.yaml").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capevolve.yaml"]


def test_init_from_cap_evolve_names_the_importer_and_writes_nothing(
    cap_evolve, tmp_path: Path, capsys
) -> None:
    project, _run = cap_evolve
    dest = tmp_path / "ours"
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["init", str(dest), "--from-cap-evolve", str(project)])
    assert exited.value.code == 2
    assert (
        "--from-cap-evolve was dropped; import a cap-evolve project with: capevolve import-cap-evolve SRC DIR"
        in (capsys.readouterr().err)
    )
    assert not dest.exists()


def _seed_passes_every_microcase(project: Path) -> None:
    from pytest_capevolve._engine.checks import ProjectEnv
    from pytest_capevolve._engine.checks import run as run_microcase
    from pytest_capevolve._project.microcase import load_project

    spec = load_spec(project)
    env = ProjectEnv(spec)
    try:
        outcomes = {case.id: run_microcase(case, spec.capability_path, env) for case in load_project(project)}
    finally:
        env.close()
    assert all(outcome.ok for outcome in outcomes.values()), outcomes


def test_the_seed_passes_every_microcase_each_init_path_writes(cap_evolve, tmp_path: Path, capsys) -> None:
    """Issue 38, trap 1: a microcase the seed fails rejects every gate by micro_test_fail."""
    project, _run = cap_evolve
    assert main(["init", str(tmp_path / "new")]) == 0
    assert main(["import-cap-evolve", str(project), str(tmp_path / "ours")]) == 0
    capsys.readouterr()
    assert (tmp_path / "new" / "microcases" / "format.yaml").is_file()
    for written in (tmp_path / "new", tmp_path / "ours"):
        _seed_passes_every_microcase(written)
    assert main(["check", str(tmp_path / "new")]) == 0
    assert "ok    1 microcase(s) pass on the seed" in capsys.readouterr().out


def test_check_fails_a_microcase_the_seed_fails_before_anything_is_paid(tmp_path: Path, capsys) -> None:
    """A prompt of the user's own in the seed: the example's microcase fails on it. check says so
    (exit 1, naming the microcase and the fix) before a baseline is paid and the microcase locked."""
    assert main(["init", str(tmp_path)]) == 0
    (tmp_path / "capability" / "prompt.md").write_text("You are my support agent.\n")
    capsys.readouterr()
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert (
        len(fail) == 1
        and "microcase 'prompt-asks-for-a-number' (microcases/format.yaml) fails on the seed" in fail[0]
    )
    assert "Mend the microcase (or the seed) now" in fail[0]
    assert not (tmp_path / ".capevolve" / "runs").exists()  # nothing started, nothing paid


def test_every_bundled_example_ignores_what_a_run_writes_as_an_init_project_does() -> None:
    """A newcomer's trap: a copy of examples/noisy_agent (the README's "your project") had no
    .gitignore, so `git add -A` committed .capevolve/, its store an embedded git repository."""
    examples = sorted(Path(__file__).resolve().parents[2].glob("examples/*/capevolve.yaml"))
    assert len(examples) >= 4
    for spec in examples:
        assert (spec.parent / ".gitignore").read_text() == FILES[".gitignore"], spec.parent


def test_the_spec_init_writes_says_what_a_timeout_is_as_the_reference_does() -> None:
    """A slow rollout is the candidate's failure, a 0 never paid again (reference/spec.md,
    explanation/candidate-failures.md); the spec's comment once called it an infra error, so a
    newcomer reading only the file they were given expected missing data paid again."""
    spec = FILES["capevolve.yaml"]
    line = next(line for line in spec.splitlines() if line.startswith("rollout_timeout_s:"))
    comment = line.split("#", 1)[1]
    assert "candidate's failure" in comment and "a 0" in comment
    assert "infra" not in comment and "missing data" not in comment
