"""Mutation testing of the decision and statistics code: do the tests catch a broken gate?

    .venv/bin/pip install mutmut   # 3.x; not a dependency of the package
    python benchmarks/mutation.py [--reuse] [--max-children N]
    python benchmarks/mutation.py --stale   # EQUIVALENT names of moved or gone code; runs nothing

Runs mutmut (configured in pyproject.toml, ``[tool.mutmut]``: the fast pure test files only,
end-to-end tests left out) over the modules in TARGETS, then prints how many mutants were
generated, killed, survived and timed out, the score over non-equivalent mutants, and every
surviving one with file:line and the changed line. Mutants judged equivalent (no test can tell
them from the original) are listed in EQUIVALENT with the reason. Slow (several minutes on two
cores), so not part of CI. Exits 2 when mutmut cannot run, 1 when a non-equivalent mutant
survives, 0 otherwise. ``--reuse`` keeps mutmut's cache in ``mutants/`` (faster, but a result
cached before a test was added can be stale); by default every mutant is run afresh.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

# The modules whose mutants are counted; repoint here (and in [tool.mutmut] only_mutate) when
# modules move.
TARGETS = (
    "pytest_capevolve/_decide/gate.py",
    "pytest_capevolve/_decide/rules.py",
    "pytest_capevolve/_policy/gate/verdicts.py",
    "pytest_capevolve/_decide/rounds.py",
    "pytest_capevolve/_stats/core.py",
    "pytest_capevolve/_stats/sign_flip.py",
    "pytest_capevolve/_stats/intervals.py",
    "pytest_capevolve/_stats/arms.py",
)

# Surviving mutants that no test can kill, by mutmut's name, with the reason (one line each).
# Names are stable while the mutated function's source is unchanged; a stale entry is reported.
EQUIVALENT: dict[str, str] = {
    "pytest_capevolve._decide.rules.x__imputation_flips__mutmut_6": "np.nan_to_num's default nan is 0.0, the value written out",
    "pytest_capevolve._decide.rules.x__imputation_flips__mutmut_22": "np.nan_to_num's default nan is 0.0, the value written out",
    "pytest_capevolve._decide.gate.x_decide__mutmut_70": "used_ids and deltas come from the same mask; a mismatch already raised at used_ids",
    "pytest_capevolve._decide.gate.x_decide__mutmut_73": "used_ids and deltas come from the same mask; a mismatch already raised at used_ids",
    "pytest_capevolve._decide.gate.x_decide__mutmut_74": "used_ids and deltas come from the same mask; a mismatch already raised at used_ids",
    "pytest_capevolve._decide.gate.x_decide__mutmut_91": "max() runs only on a non-empty null_deltas, so its default is never used",
    "pytest_capevolve._decide.gate.x_decide__mutmut_144": "Verdict.split defaults to 'val', the only split that gets past the guard",
    "pytest_capevolve._decide.gate.x_decide__mutmut_159": "as_matrix always returns 2-D, so the 1-D branch is unreachable",
    "pytest_capevolve._decide.gate.x_decide__mutmut_164": "as_matrix always returns 2-D, so the 1-D branch is unreachable",
    "pytest_capevolve._policy.gate.verdicts.xǁEvidenceǁjudge__mutmut_18": "decide's split defaults to 'val' == GATE_SPLIT",
    "pytest_capevolve._decide.rounds.x_family_levels__mutmut_13": "k = 1 is α under holm (α/1) and bh (α·1/1) too; only an unknown method, which gate_round refuses first, tells",
    "pytest_capevolve._decide.rounds.x__stage__mutmut_21": "Fraction(str(f)) == f for every Fraction (str gives 'n/d')",
    "pytest_capevolve._decide.rounds.x__stage__mutmut_43": "family_levels returns one level per p-value, so the lengths always agree",
    "pytest_capevolve._decide.rounds.x__stage__mutmut_46": "family_levels returns one level per p-value, so the lengths always agree",
    "pytest_capevolve._decide.rounds.x__stage__mutmut_47": "family_levels returns one level per p-value, so the lengths always agree",
    "pytest_capevolve._stats.sign_flip.x__count_at_least__mutmut_9": "one more zero slot above the largest sum adds nothing to the tail",
    "pytest_capevolve._stats.sign_flip.x__count_at_least__mutmut_41": "when start > total the slice is empty and sums to 0 anyway",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_14": "np.unique's values and counts always have the same length",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_17": "np.unique's values and counts always have the same length",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_19": "np.unique's values and counts always have the same length",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_18": "every use of value goes through int(), so its dtype does not matter",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_28": "one more zero slot above the largest sum adds nothing to the tail",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_68": "dist[first:] is empty when first >= dist.size, so the sum is 0.0 anyway",
    "pytest_capevolve._stats.sign_flip.x__float_tail__mutmut_76": "dist[first:] is empty when first >= dist.size, so the sum is 0.0 anyway",
    "pytest_capevolve._stats.sign_flip.x__monte_carlo__mutmut_47": "> vs >= against observed - tolerance differs only on an exact float tie with a shifted value",
    "pytest_capevolve._stats.sign_flip.x__monte_carlo__mutmut_102": "> vs >= against observed - tolerance differs only on an exact float tie with a shifted value",
    "pytest_capevolve._stats.sign_flip.x__monte_carlo__mutmut_90": "rng.integers(2) draws the same stream as rng.integers(0, 2)",
    "pytest_capevolve._stats.core.x_as_matrix__mutmut_2": "astype(None) is float64, the same as astype(float)",
    "pytest_capevolve._stats.core.x_as_matrix__mutmut_10": "numpy treats any negative reshape size as 'infer'",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_48": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_49": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_50": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_53": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_57": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_58": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_61": "the guard keeps a factor >= L*grid, which bounds every scaled delta; int64 cannot overflow",
    "pytest_capevolve._stats.sign_flip.x_integer_deltas__mutmut_59": "only sends every case down the Python-integer path, which is exact too",
    "pytest_capevolve._stats.core.x_mean_se__mutmut_3": "np.asarray of numeric input; the float cast changes no mean or SE",
    "pytest_capevolve._stats.core.x_mean_se__mutmut_5": "np.asarray of numeric input; the float cast changes no mean or SE",
    "pytest_capevolve._stats.sign_flip.x_reward_grid__mutmut_22": "< vs <= differs only when the rounding error is exactly 1e-9*grid",
    "pytest_capevolve._stats.sign_flip.xǁSignFlipResultǁat_most__mutmut_2": "Fraction(str(f)) == f for every Fraction (str gives 'n/d')",
    "pytest_capevolve._stats.core.x_task_means__mutmut_18": "dividing by max(count, 1) never divides by zero nor makes nan: errstate has nothing to silence",
    "pytest_capevolve._stats.core.x_task_means__mutmut_19": "dividing by max(count, 1) never divides by zero nor makes nan: errstate has nothing to silence",
    "pytest_capevolve._stats.core.x_task_means__mutmut_20": "dividing by max(count, 1) never divides by zero nor makes nan: errstate has nothing to silence",
    "pytest_capevolve._stats.core.x_task_means__mutmut_21": "dividing by max(count, 1) never divides by zero nor makes nan: errstate has nothing to silence",
}

ROOT = Path(__file__).resolve().parent.parent
KILLED = {"killed", "caught by type check"}


def functions_of(path: Path) -> set[str]:
    """The names mutmut gives the functions of ``path``'s module: ``x_name``, ``xǁClassǁmethod``."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            methods = (n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
            names.update(f"xǁ{node.name}ǁ{method.name}" for method in methods)
    return names


def stale_entries() -> list[str]:
    """EQUIVALENT names whose module is not in TARGETS or whose function is not in it: moved or gone
    code (found without running mutmut; a renumbering within a function needs a run to show)."""
    functions = {module_of(target): functions_of(ROOT / target) for target in TARGETS}
    stale = []
    for key in EQUIVALENT:
        module, _, name = key.partition("__mutmut_")[0].rpartition(".")
        if name not in functions.get(module, set()):
            stale.append(key)
    return stale


def module_of(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def mutmut_command() -> list[str]:
    local = Path(sys.executable).with_name("mutmut")
    found = str(local) if local.exists() else shutil.which("mutmut")
    if found is None:
        sys.exit("mutation.py: mutmut is not installed (pip install mutmut); cannot run")
    return [found]


def check_config() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("mutmut")
    if config is None:
        print("mutation.py: pyproject.toml has no [tool.mutmut] section", file=sys.stderr)
        sys.exit(2)
    listed = sorted(config.get("only_mutate", []))
    if listed != sorted(TARGETS):
        print(
            f"mutation.py: [tool.mutmut] only_mutate {listed} differs from TARGETS {sorted(TARGETS)}; "
            "make them agree",
            file=sys.stderr,
        )
        sys.exit(2)
    missing = [t for t in TARGETS if not (ROOT / t).is_file()]
    if missing:
        print(f"mutation.py: target modules not found: {missing}", file=sys.stderr)
        sys.exit(2)


def run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, text=True, capture_output=True, **kw)


def results(mutmut: list[str], patterns: list[str]) -> dict[str, str]:
    done = run([*mutmut, "results", "--all", "true"])
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        print("mutation.py: `mutmut results` failed", file=sys.stderr)
        sys.exit(2)
    statuses = {}
    for line in done.stdout.splitlines():
        match = re.fullmatch(r"\s*(\S+__mutmut_\d+): (.+)", line)
        if match and any(fnmatch.fnmatch(match[1], p) for p in patterns):
            statuses[match[1]] = match[2].strip()
    return statuses


def function_start(path: Path, key: str) -> int | None:
    """First line (decorators included) of the function a mutant name points at."""
    name = key.rsplit(".", 1)[-1].split("__mutmut_")[0]  # x_decide / xǁClassǁmethod
    cls, func = name.split("ǁ")[1:3] if name.startswith("xǁ") else (None, name[2:])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scopes = (
        [tree]
        if cls is None
        else [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls]
    )
    for scope in scopes:
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == func:
                return min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return None


SHOW = """
import sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
for line in sys.stdin:
    name, path = line.split()
    print("@@@@", name)
    print(get_diff_for_mutant(name, path=path))
"""


def diffs(keys: list[str], path_of: dict[str, str]) -> dict[str, list[str]]:
    """Each mutant's diff (function-relative hunks), from one interpreter for all of them."""
    if not keys:
        return {}
    lines = "".join(f"{k} {path_of[k.rsplit('.', 1)[0]]}\n" for k in keys)
    done = run([sys.executable, "-c", SHOW], input=lines)
    out: dict[str, list[str]] = {}
    current: list[str] = []
    for text in done.stdout.splitlines():
        if text.startswith("@@@@ "):
            current = out.setdefault(text[5:].strip(), [])
        else:
            current.append(text)
    return out


def where(diff: list[str], key: str, path: str) -> tuple[str, str]:
    """file:line and the mutated line (the diff's hunks count from the function's first line)."""
    start = function_start(ROOT / path, key)
    line, old_line, new = None, None, ""
    for text in diff:
        hunk = re.match(r"@@ -(\d+)", text)
        if hunk:
            line = int(hunk[1]) - 1
            continue
        if line is None or text.startswith(("---", "+++")):
            continue
        if text.startswith("-"):
            line += 1
            if old_line is None:
                old_line = line
        elif text.startswith("+"):
            new = new or text[1:].strip()
        else:
            line += 1
    at = "?" if start is None or old_line is None else str(start + old_line - 1)
    return f"{path}:{at}", new or "(line removed)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true", help="keep mutmut's cached results in mutants/")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--report-only", action="store_true", help="print the last run's results; run nothing"
    )
    parser.add_argument(
        "--stale",
        action="store_true",
        help="list the EQUIVALENT names whose function is gone from TARGETS; runs nothing, needs no mutmut",
    )
    options = parser.parse_args()
    if options.stale:
        stale = stale_entries()
        print("\n".join(stale) if stale else "every EQUIVALENT name is a function of TARGETS")
        return 1 if stale else 0
    check_config()
    mutmut = mutmut_command()
    patterns = [f"{module_of(t)}.x*__mutmut_*" for t in TARGETS]
    if not options.report_only:
        if not options.reuse:
            shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        command = [*mutmut, "run", "--max-children", str(options.max_children), *patterns]
        print(
            "$", " ".join(Path(command[0]).name if i == 0 else c for i, c in enumerate(command)), flush=True
        )
        done = subprocess.run(command, cwd=ROOT, text=True, capture_output=True)
        if done.returncode != 0:
            print(done.stdout[-4000:] + done.stderr[-4000:], file=sys.stderr)
            print(f"mutation.py: mutmut run failed (exit {done.returncode})", file=sys.stderr)
            return 2

    statuses = results(mutmut, patterns)
    if not statuses:
        print("mutation.py: mutmut produced no mutants for TARGETS", file=sys.stderr)
        return 2
    by_status: dict[str, list[str]] = {}
    for key, status in sorted(statuses.items()):
        by_status.setdefault(status, []).append(key)
    killed = sum(len(by_status.get(s, [])) for s in KILLED)
    timeout = len(by_status.get("timeout", []))
    survivors = [k for s, keys in by_status.items() if s not in KILLED | {"timeout"} for k in keys]
    equivalent = [k for k in survivors if k in EQUIVALENT]
    live = [k for k in survivors if k not in EQUIVALENT]
    non_equivalent = len(statuses) - len(equivalent)
    score = 100.0 * (killed + timeout) / non_equivalent if non_equivalent else 100.0

    path_of = {module_of(t): t for t in TARGETS}
    print(f"targets: {', '.join(TARGETS)}")
    print(f"generated {len(statuses)}")
    print(f"killed    {killed}")
    print(f"survived  {len(survivors)}  ({len(equivalent)} equivalent, {len(live)} not)")
    print(f"timeout   {timeout} (counted as killed)")
    others = {s: len(k) for s, k in by_status.items() if s not in KILLED | {"timeout", "survived"}}
    if others:
        print(f"other     {others} (counted as survived)")
    print(f"killed of non-equivalent: {killed + timeout}/{non_equivalent} = {score:.1f} %")
    diff_of = diffs(survivors, path_of)
    for title, keys in (("surviving (not equivalent)", live), ("equivalent", equivalent)):
        if not keys:
            continue
        print(f"\n{title}:")
        for key in keys:
            module = key.rsplit(".", 1)[0]
            place, new = where(diff_of.get(key, []), key, path_of[module])
            note = EQUIVALENT.get(key, statuses[key])
            print(f"  {place:32} {key}\n      -> {new[:100]}\n      ({note})")
    stale = sorted(set(EQUIVALENT) - set(statuses))
    if stale:
        print(f"\nEQUIVALENT names that are no longer generated (update the table): {', '.join(stale)}")
    renumbered = sorted(k for k in EQUIVALENT if statuses.get(k) in KILLED | {"timeout"})
    if renumbered:
        print(f"\nEQUIVALENT names that were killed (renumbered? update the table): {', '.join(renumbered)}")
    return 1 if live else 0


if __name__ == "__main__":
    sys.exit(main())
