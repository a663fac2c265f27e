"""The reference pages are generated from the code (docs/hooks/reference.py): every command,
option, ini key, spec key and exit code the code defines is listed, so the docs cannot drift."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "hooks"))
import reference  # noqa: E402

from pytest_capevolve import exitcodes, plugin  # noqa: E402
from pytest_capevolve._cli.main import GROUPS, build_parser  # noqa: E402
from pytest_capevolve._decide.rules import RULES  # noqa: E402
from pytest_capevolve._project.spec import INI_KEYS, VALIDATORS  # noqa: E402

PAGES = REPO / "docs" / "reference"


def page(name: str) -> str:
    return reference.render((PAGES / name).read_text(encoding="utf-8"))


def test_every_command_and_each_of_its_arguments_is_in_the_cli_page() -> None:
    text = page("cli.md")
    names = [name for name, _, _ in reference.cli_commands()]
    top = {name for name in names if " " not in name}
    assert top == {c for commands in GROUPS.values() for c in commands}  # every group's commands
    for name, parser, _ in reference.cli_commands():
        assert f"## `capevolve {name}`" in text
        section = text.split(f"## `capevolve {name}`", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if action.help == argparse.SUPPRESS:  # a dropped flag, kept to say what to use instead
                continue
            for word in action.option_strings or [action.metavar or action.dest]:
                assert f"`{word}" in section, (name, word)


def test_every_pytest_option_and_ini_key_is_in_the_options_page() -> None:
    text = page("pytest-options.md")
    options = [name for names, _ in reference.pytest_options() for name in names]
    assert "--capevolve-run" in options and "--capevolve-gate" in options and len(options) > 15
    for option in options:
        assert f"`{option}`" in text, option
    for key in reference.ini_keys():
        assert f"| `{key}` |" in text, key
    assert {f"capevolve_{k}" for k in INI_KEYS} <= set(reference.ini_keys())


def test_the_plugin_registers_the_specs_ini_keys() -> None:
    """The plugin writes the keys out (an idle session imports no spec); the spec derives them."""
    assert plugin.INI_KEYS == INI_KEYS


def test_every_spec_key_is_in_the_spec_page_with_its_default_and_meaning() -> None:
    text = page("spec.md")
    for key, (default, required) in reference.spec_keys().items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert ("required" in row) == required
        if default not in (None, ()) and not required:
            assert f"`{default}`" in row, (key, row)
    assert set(reference.spec_keys()) == set(VALIDATORS)


def test_the_spec_page_names_every_gate_mode() -> None:
    """A new user looking for `pairwise` on the spec page found only "exact or a legacy mode"."""
    row = next(line for line in page("spec.md").splitlines() if line.startswith("| `gate_mode` |"))
    assert all(f"`{mode}`" in row for mode in RULES), row


def test_a_spec_key_without_a_meaning_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    meanings = dict(reference.SPEC_MEANINGS)
    del meanings["num_trials"]
    monkeypatch.setattr(reference, "SPEC_MEANINGS", meanings)
    with pytest.raises(KeyError, match="num_trials"):
        reference.spec_markdown()


def test_every_exit_code_constant_is_in_the_exit_codes_page() -> None:
    text = page("exit-codes.md")
    codes = {v for k, v in vars(exitcodes).items() if k.isupper() and isinstance(v, int)}
    listed = {int(c) for c in re.findall(r"^\| (\d+) \|", text, re.M)}
    assert codes == listed, (codes, listed)


def test_the_playbook_page_holds_both_shipped_skills() -> None:
    text = page("playbook.md")
    assert "## `capevolve-optimize`" in text and "## `capevolve-hill-climb`" in text
    assert "<!-- reference:playbook -->\n\n## `capevolve-" in text  # generated between its markers
    assert "capevolve commit cand_0001 --decision accept" in text


def test_no_reference_page_keeps_an_unknown_marker() -> None:
    for path in PAGES.glob("*.md"):
        for name in reference.MARKER.findall(path.read_text(encoding="utf-8")):
            assert name in reference.GENERATORS, (path.name, name)


def test_the_cli_page_lists_no_command_the_parser_lacks() -> None:
    text = page("cli.md")
    documented = set(re.findall(r"^## `capevolve ([a-z -]+)`$", text, re.M))
    assert documented == {name for name, _, _ in reference.cli_commands()}
    assert build_parser().prog == "capevolve"


def test_the_committed_reference_pages_are_what_the_code_generates_now() -> None:
    """The pages are committed generated, so a reader on GitHub sees tables, not a marker; a
    page the code has moved away from fails here with the command that regenerates it."""
    for path in sorted(p for folder in reference.FOLDERS for p in (REPO / "docs" / folder).glob("*.md")):
        text = path.read_text(encoding="utf-8")
        assert "<!-- /reference:" in text or "<!-- reference:" not in text, f"{path.name}: a bare marker"
        assert reference.render(text) == text, (
            f"{path.relative_to(REPO)} is not what the code generates now: run "
            "`python docs/hooks/reference.py` and commit the pages"
        )


def test_the_threat_model_lists_every_guard_of_the_registry_with_its_test() -> None:
    from pytest_capevolve._policy.guards import GUARDS

    page = (PAGES.parent / "explanation" / "threat-model.md").read_text(encoding="utf-8")
    assert "<!-- reference:guards -->" in page
    for guard in GUARDS.values():
        assert f"| `{guard.name}` |" in page and f"`{guard.test}`" in page, guard.name


LAYOUT = REPO / "docs" / "explanation" / "code-layout.md"


def test_every_module_of_the_package_is_on_a_row_of_the_code_layout_page() -> None:
    package = REPO / "pytest_capevolve"
    text = LAYOUT.read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### `([^`]+)`\n\n(.*?)(?=\n### |\n<!-- /reference)", text, re.M | re.S))
    modules = sorted(package.rglob("*.py"))
    assert len(modules) > 200
    for path in modules:
        parts = path.relative_to(package).with_suffix("").parts
        floor = "pytest_capevolve" if len(parts) == 1 else f"{parts[0]}/"
        row = "/".join(parts[1:]).removesuffix("__init__") if len(parts) > 1 else parts[0]
        assert f"| `{row or '__init__'}` |" in sections[floor], (path, floor)
    floors = {name for floor in reference.floors() for name in floor}
    assert {p.name for p in package.iterdir() if (p / "__init__.py").exists()} <= floors


def test_every_room_of_a_floor_in_rooms_has_its_place_in_the_floors_order() -> None:
    """A floor split into rooms (its own `layers` contract): each of its sub-packages is named in
    that contract, so a new room takes a place in the order, and the page shows the order."""
    package = REPO / "pytest_capevolve"
    text = LAYOUT.read_text(encoding="utf-8")
    for floor, layers in reference.rooms().items():
        named = {name for layer in layers for name in layer}
        rooms = {p.name for p in (package / floor).iterdir() if (p / "__init__.py").exists()}
        assert rooms <= named, (floor, rooms - named)
        order = text.split(f"### `{floor}/`")[1].split("| module |")[0]
        assert all(f"`{room}/`" in order for room in rooms), floor


def test_a_new_module_gets_its_row_from_its_docstring_and_one_without_is_refused(tmp_path: Path) -> None:
    package = tmp_path / "pytest_capevolve"
    shutil.copytree(REPO / "pytest_capevolve", package, ignore=shutil.ignore_patterns("__pycache__"))
    here = reference.code_layout_markdown()  # of this checkout's package
    assert reference.code_layout_markdown(package) == here
    probe = package / "_stats" / "zz_probe.py"
    probe.write_text('"""A probe module: ``x`` by :func:`.core.mean`.\n\nMore."""\n', encoding="utf-8")
    grown = reference.code_layout_markdown(package)
    assert "| `zz_probe` | A probe module: `x` by `core.mean`. |" in grown.split("### `_stats/`")[1]
    assert grown != here  # the committed page is stale until regenerated
    probe.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="zz_probe.py: no docstring"):
        reference.code_layout_markdown(package)


def test_the_readme_says_where_capevolve_is_before_its_first_bare_use() -> None:
    """A new user after the README's set-up (which calls `.venv/bin/pytest`) typed the README's
    `capevolve compare …` and got "command not found": the venv is not active."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first_bare = min(m.start() for m in re.finditer(r"^capevolve ", text, re.MULTILINE))
    assert "source .venv/bin/activate" in text[:first_bare]


def test_no_module_of_the_package_is_over_500_lines() -> None:
    """A module over 500 lines holds more than one job: split it by job (CONTRIBUTING.md)."""
    long = {
        str(path.relative_to(REPO)): n
        for path in (REPO / "pytest_capevolve").rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not long, f"split these by job: {long}"
