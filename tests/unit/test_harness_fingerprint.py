"""The harness fingerprint on its own: which files count, and what a change looks like."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_capevolve import Task
from pytest_capevolve._project import harness
from pytest_capevolve._project.harness import CONFIG_FILE_KEY


def _project(tmp_path: Path) -> Path:
    (tmp_path / "capability").mkdir()
    (tmp_path / "capability" / "prompt.md").write_text("be kind\n")
    (tmp_path / "capability" / "conftest.py").write_text("# inside the capability: the tamper guard's\n")
    (tmp_path / "scoring").mkdir()
    (tmp_path / "scoring" / "__init__.py").write_text("")
    (tmp_path / "scoring" / "judge.py").write_text("from .rules import RULE\n")
    (tmp_path / "scoring" / "rules.py").write_text("RULE = 1\n")
    (tmp_path / "helpers.py").write_text("X = 1\n")
    (tmp_path / "adapter.py").write_text("import json\nimport helpers\nfrom scoring import judge\n")
    (tmp_path / "tasks.json").write_text('[{"id": "a"}]\n')
    (tmp_path / "README.md").write_text("notes\n")
    (tmp_path / "capevolve.yaml").write_text("adapter: adapter.py:A\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text("# planted\n")
    (tmp_path / ".capevolve" / "runs" / "r" / "work" / "t").mkdir(parents=True)
    (tmp_path / ".capevolve" / "runs" / "r" / "work" / "t" / "conftest.py").write_text("")
    return tmp_path


def _fingerprint(root: Path) -> dict[str, str]:
    return harness.fingerprint(root, "adapter.py:A", exclude=[root / "capability"])


def test_the_fingerprint_holds_the_adapter_what_it_imports_and_every_conftest(tmp_path):
    root = _project(tmp_path)
    assert sorted(_fingerprint(root)) == [
        "adapter.py",
        "helpers.py",
        "scoring/__init__.py",
        "scoring/judge.py",
        "scoring/rules.py",
        "tests/conftest.py",
    ]


@pytest.mark.attack(
    "harness",
    attack=(
        "the project's `adapter.py` (or a module it imports, two levels down) edited after the "
        "baseline; a `conftest.py` planted"
    ),
)
def test_editing_a_scorer_imported_two_levels_down_is_a_change(tmp_path):
    root = _project(tmp_path)
    locked = _fingerprint(root)
    (root / "scoring" / "rules.py").write_text("RULE = 2  # score everything 1\n")
    (root / "conftest.py").write_text("def pytest_runtest_logreport(report): ...\n")
    assert harness.changes(locked, _fingerprint(root)) == [
        "conftest.py (added)",
        "scoring/rules.py (changed)",
    ]


def test_what_is_not_harness_moves_nothing(tmp_path):
    root = _project(tmp_path)
    locked = _fingerprint(root)
    (root / "capability" / "prompt.md").write_text("be kinder\n")  # a candidate edit
    (root / "README.md").write_text("more notes\n")
    (root / "calls.txt").write_text("n01 seed 0\n")  # what an adapter logs beside itself
    (root / "optimizer.py").write_text("# a script nothing imports\n")
    (root / "capevolve.yaml").write_text("adapter: adapter.py:A\nmax_usd: 3\n")  # spec.lock's job
    (root / "candidates" / "c1").mkdir(parents=True)
    (root / "candidates" / "c1" / "prompt.md").write_text("new\n")
    assert harness.changes(locked, _fingerprint(root)) == []


def test_the_tasks_digest_sees_a_changed_gold_answer_and_nothing_else():
    pool = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="6")]
    same = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="6")]
    edited = [Task(id="a", input="2+2", target="4"), Task(id="b", input="3+3", target="7")]
    assert harness.tasks_digest(pool) == harness.tasks_digest(same)
    assert harness.tasks_digest(pool) != harness.tasks_digest(edited)


def test_the_refusal_is_one_line_naming_the_files_and_the_way_on():
    line = harness.refusal("r1", [f"f{i}.py (changed)" for i in range(6)])
    assert "\n" not in line
    assert (
        "run r1" in line and "f0.py (changed)" in line and "2 more" in line and "--capevolve-new-run" in line
    )


# -- what the lock holds besides the import closure (issue 24, item 3) -----------------------


def test_a_module_loaded_by_importlib_runpy_or_exec_is_harness(tmp_path):
    root = _project(tmp_path)
    (root / "judges").mkdir()
    (root / "judges" / "strict.py").write_text("PASS = 1\n")
    (root / "rubric.py").write_text("import helpers\n")
    (root / "graded.py").write_text("X = 2\n")
    (root / "adapter.py").write_text(
        "import importlib.util, os, runpy\nfrom pathlib import Path\n"
        'spec = importlib.util.spec_from_file_location("j", Path(__file__).parent / "judges" / "strict.py")\n'
        'runpy.run_path(os.path.join(os.path.dirname(__file__), "rubric.py"))\n'
        'exec(open("graded.py").read())\n'
        'NOT_A_MODULE = "tools/reply.py"  # a candidate\'s file, resolved in no harness folder\n'
    )
    assert {"judges/strict.py", "rubric.py", "graded.py", "helpers.py"} <= set(_fingerprint(root))
    locked = _fingerprint(root)
    (root / "judges" / "strict.py").write_text("PASS = 0  # everything passes\n")
    assert harness.changes(locked, _fingerprint(root)) == ["judges/strict.py (changed)"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pytest.ini", "[pytest]\naddopts = -p planted\n"),
        ("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-p planted"\n'),
        ("tox.ini", "[pytest]\naddopts = -p planted\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = -p planted\n"),
    ],
)
def test_a_pytest_config_that_adds_options_is_harness(tmp_path, name, text):
    root = _project(tmp_path)
    assert harness.pytest_config(root) == {CONFIG_FILE_KEY: "none"}
    (root / name).write_text(text)
    planted = harness.pytest_config(root)
    assert planted.keys() == {harness.PYTEST_CONFIG_KEY, CONFIG_FILE_KEY}
    assert planted[CONFIG_FILE_KEY] == name
    (root / name).write_text(text.replace("planted", "other"))
    assert harness.pytest_config(root) != planted


def test_capevolve_ini_keys_and_a_config_without_a_pytest_section_are_not_harness(tmp_path):
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no pytest section
    (root / "tox.ini").write_text("[tox]\nenvlist = py311\n")
    assert harness.pytest_config(root) == {CONFIG_FILE_KEY: "none"}
    (root / "pytest.ini").write_text("[pytest]\ncapevolve_gate_mode = exact\n")  # the spec lock's
    assert harness.pytest_config(root) == {CONFIG_FILE_KEY: "pytest.ini"}  # only where it is


@pytest.mark.attack(
    "harness",
    attack=(
        'a `pytest.ini` with an empty `[pytest]` section planted above the project (digested as "no '
        'config", before)'
    ),
)
def test_an_empty_pytest_section_above_the_project_is_where_pytest_roots_the_session(tmp_path):
    """Issue 37: an empty ``[pytest]`` above the project moves the rootdir; it was "no config"."""
    (tmp_path / "proj").mkdir()
    root = _project(tmp_path / "proj")
    before = harness.pytest_config(root)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    after = harness.pytest_config(root)
    assert after == {CONFIG_FILE_KEY: "../pytest.ini"} != before
    assert harness.changes(before, after) == ["<pytest config file> (changed)"]
    # a lock without the config file's place (a pre-release build's) reads as changed, not as equal
    assert harness.changes({"adapter.py": "x"}, {"adapter.py": "x", **after}) == [
        "<pytest config file> (added)"
    ]


def test_pytest_env_variables_are_held_by_the_digest_of_their_values():
    assert harness.pytest_env({}) == {} and harness.pytest_env({"PYTEST_ADDOPTS": ""}) == {}
    one = harness.pytest_env({"PYTEST_ADDOPTS": "-p planted", "HOME": "/x"})
    assert list(one) == ["<env PYTEST_ADDOPTS>"] and "planted" not in one["<env PYTEST_ADDOPTS>"]
    assert harness.pytest_env({"PYTEST_PLUGINS": "planted"}).keys() == {"<env PYTEST_PLUGINS>"}


def test_harness_files_default_to_the_evaluation_data_and_take_the_specs_globs(tmp_path):
    root = _project(tmp_path)
    (root / "data").mkdir()
    (root / "data" / "gold.json").write_text("{}\n")
    (root / "answers.csv").write_text("a,1\n")
    (root / "model.yaml").write_text("model: m\n")
    (root / "run.log").write_text("a log the adapter writes\n")
    (root / "capability" / "gold.json").write_text("{}\n")  # a candidate's: the tamper guard's
    found = harness.harness_files(root, ["default"], exclude=[root / "capability"])
    assert sorted(p.relative_to(root).as_posix() for p in found) == ["answers.csv", "data/gold.json"]
    found = harness.harness_files(root, ["default", "*.yaml"], exclude=[root / "capability"])
    assert "model.yaml" in {p.name for p in found} and "capevolve.yaml" in {p.name for p in found}
    assert harness.harness_files(root, [], exclude=[]) == []


def test_a_folder_the_walk_cannot_list_is_an_error_naming_it_not_files_left_out(tmp_path, monkeypatch):
    """The suite runs as root, whom no mode keeps out: the folder is made unlistable by the
    call the walk makes, as chmod 000 makes it for anyone else."""
    root = _project(tmp_path)
    (root / "data").mkdir()
    (root / "data" / "gold.json").write_text("{}\n")
    real_scandir = harness.os.scandir

    def scandir(path):
        if path == str((root / "data").resolve()):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(harness.os, "scandir", scandir)
    with pytest.raises(
        PermissionError, match=r"data: the harness lock cannot list this folder.*Permission denied"
    ):
        harness.harness_files(root, ["default"], exclude=[root / "capability"])


def test_a_conftest_registered_from_above_the_project_is_locked_and_loading_less_is_no_change(tmp_path):
    """Issue 37: what pytest registered from above the project is held by its relative path."""
    import types

    (tmp_path / "proj").mkdir()
    root = _project(tmp_path / "proj")
    (tmp_path / "conftest.py").write_text("def pytest_configure(config):\n    pass\n")
    inside = types.SimpleNamespace(__file__=str(root / "conftest.py"))
    above = types.SimpleNamespace(__file__=str(tmp_path / "conftest.py"))
    held = harness.conftest_digests([inside, above, object()], root)
    assert list(held) == ["<conftest> ../conftest.py"]  # the project's own are the walk's
    base = harness.pytest_config(root)
    assert harness.changes(base, {**base, **held}) == ["<conftest> ../conftest.py (added)"]
    assert harness.changes({**base, **held}, base) == []  # a session that did not load it
    (tmp_path / "conftest.py").write_text("# rewritten\n")
    now = harness.conftest_digests([above], root)
    assert harness.changes({**base, **held}, {**base, **now}) == ["<conftest> ../conftest.py (changed)"]


@pytest.mark.attack(
    "harness",
    attack="a microcase in a sub-folder of `microcases/` (run by the session) edited after the baseline",
    outcome="the harness lock holds every microcase the session loads, sub-folders included: a change",
)
def test_a_microcase_in_a_sub_folder_is_locked_as_the_session_loads_it(tmp_path):
    from pytest_capevolve._project.spec import load_spec

    root = _project(tmp_path)
    (root / "microcases" / "sub").mkdir(parents=True)
    nested = root / "microcases" / "sub" / "x.yaml"
    nested.write_text("- id: m1\n")
    (root / "capevolve.yaml").write_text("adapter: adapter.py:A\ncapability_path: capability\n")
    spec = load_spec(root)
    locked = harness.of_project(spec, [Task(id="a")])
    assert "microcases/sub/x.yaml" in locked
    nested.write_text("- id: m1  # loosened\n")
    assert harness.of_project(spec, [Task(id="a")]) != locked
