"""The reference pages, generated from the code at build time (a mkdocs hook, so they cannot drift).

A page under ``docs/reference/`` holds a block such as ``<!-- reference:cli -->`` … ``<!--
/reference:cli -->``; between the markers go tables built from the code itself: the
``capevolve`` command from its argparse parser (every group registered), the pytest options and
ini keys from ``pytest_addoption``, the spec keys from the spec's validators and defaults, and the
exit codes from the one table in ``exitcodes.py``; the guards' table of
``docs/explanation/threat-model.md`` from the registry ``GUARDS`` (``_policy/guards.py``) and its
other tables (``attacks-SECTION`` blocks) from the attack tests' markers (:mod:`attacks`); and
``docs/explanation/code-layout.md`` from the ``layers`` contract and every module's docstring. The
pages are committed with the
tables in them (``python docs/hooks/reference.py`` regenerates them), so a reader on GitHub sees
them; when mkdocs reads a page this hook generates them again. ``tests/unit/test_docs_reference.py``
checks that every command, option, key, code and module the code defines is listed, and that the
committed pages are what the code generates now.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import attacks  # docs/hooks/attacks.py: mkdocs, the tests and this script run with docs/hooks on sys.path

# a generated block: its opening marker, what was generated last, its closing marker (a page
# written before the pages were committed generated holds the opening marker alone)
MARKER = re.compile(r"<!-- reference:([a-z-]+) -->(?:.*?<!-- /reference:\1 -->)?", re.DOTALL)

# What each spec key means, in a sentence a reader can act on. The build fails (and so does the
# reference test) when the spec's validators gain a key this table does not explain.
SPEC_MEANINGS = {
    "adapter": "`file.py:Class`, relative to the spec: the adapter with `tasks`, `run_target`, `score`",
    "capability_path": "the seed capability folder (always tag `seed`)",
    "split_seed": "seed of the split of the task pool, frozen in the run dir on first use",
    "split_train": "share of the pool in train",
    "split_val": "share of the pool in val (the only split the gate reads)",
    "split_test": "share of the pool in test (sealed: scored once, by finalize)",
    "split_ids_file": "JSON/YAML `{train: [...], val: [...], test: [...]}` instead of the ratios",
    "num_trials": "trials per task; trial k runs with `seed = base_seed + k` for every candidate",
    "base_seed": "the first trial's seed",
    "success_threshold": "an item passes when its reward is at least this",
    "rollout_timeout_s": "a slower rollout is the candidate's failure: a 0 labelled `candidate failure: timeout …`, never paid again",
    "concurrency": "rollouts in flight at once in each process (`--capevolve-concurrency` wins); changes no rollout",
    "gate_mode": "the gate rule: `exact` (default, calibrated), `pairwise` (a judge's preferences from the adapter's `prefer()`; see [pairwise judging](../how-to/llm-judge.md#pairwise-judging)) or a cap-evolve legacy mode (`paired`, `significant`, `strict`, `threshold`, `simplicity_tiebreak`)",
    "gate_k_se": "k of the legacy `paired` rule Δ̄ > k·SE",
    "gate_alpha": "the false-accept rate the `exact` gate holds",
    "gate_threshold": "the bar of the legacy `threshold` rule",
    "min_coverage": "paired coverage below this makes a verdict indecisive, never a reject",
    "regression_rule": "which drops are regressions (listed in every verdict, vetoed with "
    "`--capevolve-veto-regressions`): `noise` (default), a drop beyond twice its own noise on a task "
    "the best passed; `strict`, any val task the best scored higher on (`--capevolve-regression-rule` wins)",
    "max_metric_calls": "rollouts a run may pay; a session that would cross it is refused before paying",
    "max_usd": "$ a run may spend (runner + optimizer), checked at the run's measured $/rollout before paying",
    "max_iterations": "decisions a run may book; a gate session past it is refused before paying",
    "stall": "rejects in a row; a gate session past it is refused before paying",
    "stop_condition": "free text read by a fixed grammar: its caps tighten the ceilings, its goals make `spend` say stop; a clause it cannot read is reported, never guessed",
    "protected_paths": "globs a candidate may not change (`default` names the usual scorer, gold and data files); frozen with the run",
    "optimizer": "default `--optimizer` command of `capevolve hill-climb`",
    "algorithm_focus": "default `--focus` of `capevolve hill-climb`",
    "store": "default `--store` of `capevolve hill-climb`",
    "gate_min_effect": "the smallest gain worth having: the sequential gate's futility target; `spend` compares its MDE with it",
    "gate_margin": 'non-inferiority: δ in (−1, 0] makes the exact gate ask "no worse than δ" with a betting test valid for any rewards in [0, 1] (frozen with the run; 0 asks "better"; see [the gate](../explanation/the-gate.md#margins))',
    "gate_alpha_schedule": "how α is spent across a run's gate decisions on one val split: `constant` (one-shot gating), `basel`, `lord` or `addis` (what `hill-climb` and the agent hand-off use unless the spec names one; a run frozen under `lord` keeps it)",
    "screen_alpha": "a subset screen kills on proven harm at this one-sided p",
    "grow_max_looks": "looks a decision may take (1 = no growth; 2 or 3: the first gate keeps half of α for the grows)",
    "judge_rescores": "times each output is scored by a scorer the adapter declares stochastic (an LLM judge); the reward is their mean; frozen with the run",
    "leak_guard_min_length": "shortest val/test gold answer (and all-letter or all-digit id) the leak guard looks for in what a candidate adds; ids mixing letters and digits count at any length (`false`: off, said in every verdict); frozen with the run",
    "harness_files": "globs of data and config files the harness lock holds besides the adapter's code (`default`: gold, answers, `tasks/`, `data/`); candidate code cannot read them (the sandbox boundary); frozen with the run",
    "shared_ledger": "a JSON-lines file shared with other projects: their decisions and test scorings count here (matched by task content, labelled with their project and the ledger), and this project's go there; none: the project's own memory only; frozen with the run",
    "sandbox_writable": "folders candidate code may write besides its scratch folder (what an honest `live()` writes into), relative to the spec's folder or absolute; none may hold or lie inside `.capevolve/`; frozen with the run ([candidate isolation](../explanation/candidate-isolation.md#the-boundary))",
}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def cli_commands() -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """Every ``capevolve`` command (nested ones as ``work new``), its parser and its one-line help."""
    from pytest_capevolve._cli.main import build_parser

    def walk(
        prefix: str, parser: argparse.ArgumentParser
    ) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
        helps = _helps(parser)
        for name, sub in sorted(_subcommands(parser).items()):
            full = f"{prefix} {name}".strip()
            yield full, sub, helps.get(name, "") or (sub.description or "")
            yield from walk(full, sub)

    yield from walk("", build_parser())


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs == 0:
            return names
        metavar = action.metavar or action.dest.upper()
        return f"{names} `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    return f"`{action.metavar or action.dest}`"


def cli_markdown() -> str:
    lines = []
    for name, parser, summary in cli_commands():
        lines += [f"## `capevolve {name}`", ""]
        if summary:
            lines += [_cell(summary), ""]
        usage = " ".join(parser.format_usage().split())
        lines += ["```", usage.removeprefix("usage: "), "```", ""]
        rows = [
            (action, _argument(action))
            for action in parser._actions
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
            and action.help != argparse.SUPPRESS  # a dropped flag, kept only to say what to use instead
        ]
        if rows:
            lines += ["| argument | default | meaning |", "|---|---|---|"]
            for action, arg in rows:
                default = (
                    "" if action.default in (None, False, argparse.SUPPRESS, []) else f"`{action.default}`"
                )
                choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
                meaning = action.help or ""
                if "%(" in meaning:
                    meaning = meaning % vars(action)
                lines.append(f"| {arg} | {_cell(default)} | {_cell(meaning)}{_cell(choices)} |")
            lines.append("")
    return "\n".join(lines)


def _pytest_parser():  # type: ignore[no-untyped-def]
    from _pytest.config.argparsing import Parser

    from pytest_capevolve import plugin

    parser = Parser(_ispytest=True)
    plugin.pytest_addoption(parser)
    return parser


def pytest_options() -> list[tuple[list[str], dict]]:
    """Every option ``pytest_addoption`` adds: (names, argparse attributes)."""
    parser = _pytest_parser()
    every = [(option.names(), option.attrs()) for group in parser._groups for option in group.options]
    return [(names, attrs) for names, attrs in every if attrs.get("help") != argparse.SUPPRESS]  # dropped


def ini_keys() -> dict[str, tuple[str, str, object]]:
    """Every ini key ``pytest_addoption`` adds: name → (help, type, default)."""
    return dict(_pytest_parser()._inidict)


def options_markdown() -> str:
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for names, attrs in pytest_options():
        metavar = attrs.get("metavar")
        arg = ", ".join(f"`{n}`" for n in names) + (f" `{metavar}`" if metavar else "")
        default = attrs.get("default")
        shown = "" if default in (None, False, []) else f"`{default}`"
        choices = f" (one of {', '.join(map(str, attrs['choices']))})" if attrs.get("choices") else ""
        lines.append(f"| {arg} | {_cell(shown)} | {_cell(attrs.get('help', ''))}{_cell(choices)} |")
    return "\n".join(lines)


def ini_markdown() -> str:
    lines = ["| ini key | meaning | default |", "|---|---|---|"]
    for name, (help_text, _kind, default) in ini_keys().items():
        lines.append(
            f"| `{name}` | {_cell(help_text)} | {_cell(f'`{default}`' if default not in ('', None) else '')} |"
        )
    return "\n".join(lines)


def spec_keys() -> dict[str, tuple[object, bool]]:
    """Every key the spec's validators accept: key → (default, required)."""
    from pytest_capevolve._project.spec import REQUIRED, VALIDATORS, Spec

    defaults = {f.name: f for f in dataclasses.fields(Spec)}
    out: dict[str, tuple[object, bool]] = {}
    for key in VALIDATORS:
        field = defaults[key]
        if field.default is not dataclasses.MISSING:
            default: object = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = None
        out[key] = (default, key in REQUIRED)
    return out


def spec_markdown() -> str:
    from pytest_capevolve._project.spec import INI_KEYS

    missing = [key for key in spec_keys() if key not in SPEC_MEANINGS]
    if missing:
        raise KeyError(f"docs/hooks/reference.py: SPEC_MEANINGS lacks spec key(s) {', '.join(missing)}")
    lines = ["| key | default | ini key | meaning |", "|---|---|---|---|"]
    for key, (default, required) in spec_keys().items():
        shown = "required" if required else ("none" if default in (None, ()) else f"`{default}`")
        ini = f"`capevolve_{key}`" if key in INI_KEYS else "—"
        lines.append(f"| `{key}` | {shown} | {ini} | {_cell(SPEC_MEANINGS[key])} |")
    return "\n".join(lines)


def exit_codes() -> list[tuple[str, list[tuple[int, str]]]]:
    """The tables of ``exitcodes.py``'s docstring: (title, [(code, meaning)])."""
    from pytest_capevolve import exitcodes

    doc = exitcodes.__doc__ or ""
    tables: list[tuple[str, list[tuple[int, str]]]] = []
    title, rows, inside = "", [], False
    for line in doc.splitlines():
        if line.startswith("===="):
            if inside:
                tables.append((title, rows))
                rows = []
            inside = not inside
            continue
        if not inside:
            if line.strip():
                title = line.strip()
            continue
        match = re.match(r"^(\d+)\s+(.*)$", line)
        if match:
            rows.append((int(match[1]), match[2].strip()))
        elif rows and line.strip():
            code, meaning = rows[-1]
            rows[-1] = (code, f"{meaning} {line.strip()}")
    return tables


def _rst(text: str) -> str:
    """A docstring's reStructuredText literals and roles as Markdown."""
    return re.sub(r":mod:`[^`]*`", "the CLI", text).replace("``", "`")


def exit_codes_markdown() -> str:
    lines = []
    for title, rows in exit_codes():
        lines += [f"**{_cell(_rst(title.rstrip(':')))}**", "", "| code | meaning |", "|---|---|"]
        lines += [f"| {code} | {_cell(_rst(meaning))} |" for code, meaning in rows]
        lines.append("")
    lines.append("pytest's own codes keep their meaning: 2 interrupted (Ctrl-C), 4 usage or spec error.")
    return "\n".join(lines)


def guards_markdown() -> str:
    """The guard registry (``_policy/guards.py``), one row per guard, each naming its test."""
    from pytest_capevolve._policy.guards import GUARDS

    lines = [
        "| guard | stops | outcome | where it runs: the way on it names | test |",
        "|---|---|---|---|---|",
    ]
    for guard in GUARDS.values():
        ways = {at: guard.way_on_at(at) or "named in the check's own message" for at in guard.checkpoints}
        where = "<br>".join(f"{_cell(at)}: *{_cell(way)}*" for at, way in ways.items())
        lines.append(
            f"| `{guard.name}` | {_cell(guard.stops)} | {_cell(guard.outcome)} | {where} | `{guard.test}` |"
        )
    return "\n".join(lines)


def events_markdown() -> str:
    """The record's kinds (``_store/log/event_kinds.py``), one row each: its fields, its meaning."""
    from pytest_capevolve._store.log.event_kinds import DECLARED

    lines = ["| kind | fields (*optional*) | what it records |", "|---|---|---|"]
    for kind in DECLARED.values():
        optional = kind.fields.__optional_keys__  # type: ignore[attr-defined]
        fields = ", ".join(f"*{f}*" if f in optional else f for f in sorted(kind.allowed))
        lines.append(f"| `{kind}` | {fields} | {_cell(_rst(kind.meaning))} |")
    return "\n".join(lines)


def playbook_markdown() -> str:
    """The playbooks shipped for coding agents (``pytest_capevolve/skills/*/SKILL.md``), each
    as a section: front matter as a line, headings one level down."""
    from pytest_capevolve._cli.project import SKILLS, skill_front_matter

    lines = []
    for path in sorted(SKILLS.glob("*/SKILL.md")):
        meta = skill_front_matter(path)
        body = path.read_text(encoding="utf-8").split("---", 2)[2]
        lines += [f"## `{meta['name']}`", "", f"*{meta['description']}*", ""]
        fenced = False
        for line in body.strip().splitlines():
            if line.startswith("```"):
                fenced = not fenced
            if not fenced and line.startswith("# "):
                continue  # the section's own title is the skill's name above
            lines.append("#" + line if not fenced and line.startswith("## ") else line)
        lines.append("")
    return "\n".join(lines)


# The code-layout page: the floors of the import-linter `layers` contract (pyproject.toml), top to
# bottom, and every module of the package on a row, described by its docstring's first paragraph.
PACKAGE = Path(__file__).resolve().parents[2] / "pytest_capevolve"


def _layers() -> dict[str, list[list[str]]]:
    """The `layers` contracts of pyproject.toml, by container (``pytest_capevolve`` for the floors,
    ``_store`` for that floor's rooms): each a list of layers, top to bottom, of names."""
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    return {
        c["containers"][0].removeprefix("pytest_capevolve."): [
            [n.strip() for n in layer.split("|")] for layer in c["layers"]
        ]
        for c in pyproject["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers"
    }


def floors() -> list[list[str]]:
    """The `layers` contract's floors, top to bottom: each a list of its packages and modules."""
    return _layers()["pytest_capevolve"]


def rooms() -> dict[str, list[list[str]]]:
    """Each floor's rooms (its sub-packages by job) and top modules, top to bottom, from its own
    `layers` contract; a floor without one is not there."""
    return {name: layers for name, layers in _layers().items() if name != "pytest_capevolve"}


def _summary(path: Path, package: Path = PACKAGE) -> str:
    """A module's docstring's first paragraph, its reStructuredText roles as Markdown code."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    if not first:
        raise ValueError(f"{path.relative_to(package.parent)}: no docstring says what the module is for")
    first = re.sub(r":[a-z]+:`~?\.*([^`]*)`", r"`\1`", first)
    return _cell(first.replace("``", "`"))


def module_rows(package: Path) -> list[tuple[str, str]]:
    """Every module under ``package`` (sub-packages by their ``__init__``): (path, summary)."""
    rows = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        shown = name.removesuffix("__init__.py") or "__init__.py"
        rows.append((shown.removesuffix(".py"), _summary(path, package.parent)))
    return rows


def code_layout_markdown(root: Path = PACKAGE) -> str:
    """The floors table and a table of modules per package, for the package at ``root``."""
    lines = ["| floor | package | what it holds |", "|---|---|---|"]
    sections = [("pytest_capevolve", [(p.stem, _summary(p, root)) for p in sorted(root.glob("*.py"))])]
    for number, floor in enumerate(floors(), 1):
        for name in floor:
            package = root / name
            if package.is_dir():
                sections.append((f"{name}/", module_rows(package)))
                lines.append(f"| {number} | `{name}/` | {_summary(package / '__init__.py', root)} |")
            else:
                lines.append(f"| {number} | `{name}.py` | {_summary(package.with_suffix('.py'), root)} |")
    floor_rooms = rooms()
    for title, rows in sections:
        lines += ["", f"### `{title}`", ""]
        if title.rstrip("/") in floor_rooms:
            order = " → ".join(
                ", ".join(f"`{n}/`" if (root / title / n).is_dir() else f"`{n}`" for n in layer)
                for layer in floor_rooms[title.rstrip("/")]
            )
            lines += [
                f"Rooms and top modules, top to bottom: each imports only those after its arrow: {order}.",
                "",
            ]
        lines += ["| module | what it is for |", "|---|---|"]
        lines += [f"| `{name}` | {summary} |" for name, summary in rows]
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_markdown,
    "pytest-options": options_markdown,
    "ini-keys": ini_markdown,
    "spec-keys": spec_markdown,
    "exit-codes": exit_codes_markdown,
    "playbook": playbook_markdown,
    "guards": guards_markdown,
    "events": events_markdown,
    "code-layout": code_layout_markdown,
}


def generated(name: str) -> str:
    """What the block ``name`` holds: an attack table (``attacks-SECTION``) or a named generator's."""
    if name.startswith(attacks.PREFIX):
        return attacks.attacks_markdown(name.removeprefix(attacks.PREFIX))
    return GENERATORS[name]()


def render(markdown: str) -> str:
    """The page with each ``<!-- reference:NAME -->`` block (up to its ``<!-- /reference:NAME
    -->``) holding its tables generated now, between the two markers."""
    return MARKER.sub(
        lambda m: f"<!-- reference:{m[1]} -->\n\n{generated(m[1]).strip()}\n\n<!-- /reference:{m[1]} -->",
        markdown,
    )


def on_page_markdown(markdown: str, **_: object) -> str:  # the mkdocs hook
    return render(markdown)


def write_pages(folder: Path, names: tuple[str, ...] = ("*.md",)) -> list[Path]:
    """Regenerate every page of ``folder`` in place; returns the pages that changed. The pages
    are committed generated, so a reader on GitHub sees the tables, not a marker;
    ``tests/unit/test_docs_reference.py`` fails while a committed page differs from this."""
    changed = []
    for page in sorted(p for name in names for p in folder.glob(name)):
        text = page.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            page.write_text(fresh, encoding="utf-8")
            changed.append(page)
    return changed


# the folders whose pages hold generated blocks
FOLDERS = ("reference", "explanation")

if __name__ == "__main__":  # python docs/hooks/reference.py: regenerate the generated pages
    for folder in FOLDERS:
        for path in write_pages(Path(__file__).resolve().parents[1] / folder):
            print(f"regenerated {path}")
