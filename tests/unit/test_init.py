"""``capevolve init``: a new project's files, never written over an existing one; with
``--from-cap-evolve`` the importer's project instead. (That the project checks, gates and seals
offline is played by tests/e2e/test_docs_commands.py from the tutorial.)"""

from __future__ import annotations

import json
from pathlib import Path

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
    assert (tmp_path / "capevolve.yaml").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capevolve.yaml"]


def test_init_from_cap_evolve_imports_the_project(cap_evolve, tmp_path: Path, capsys) -> None:
    project, _run = cap_evolve
    dest = tmp_path / "ours"
    assert main(["init", str(dest), "--from-cap-evolve", str(project), "--json"]) == 0
    capsys.readouterr()
    spec = load_spec(dest)
    assert spec.gate_mode == "paired" and spec.num_trials == 5  # cap-evolve's keys carried over
