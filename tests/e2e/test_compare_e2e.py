"""``capevolve compare`` as a CI job runs it: the installed command in a child process, on real
inspect_ai logs made live with inspect's mock model and on each how-to page's files; its exit code
is the gate's. The CSV cases call the command's ``main()`` in process (what the installed
command returns as its exit code, without a Python start-up per call)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from docs_commands import play

from pytest_capevolve._cli.main import main

REPO = Path(__file__).resolve().parents[2]


def compare(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_capevolve._cli.main", "compare", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def compare_in_process(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``compare(*args, cwd=)`` as above, through ``main()`` in this process: its return value
    and what it printed."""

    def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main(["compare", *map(str, args)])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["capevolve", "compare", *map(str, args)], code, out, err)

    return run


def inspect_how_to(folder: Path) -> tuple[list[int], Path]:
    """docs/how-to/compare-inspect.md's console blocks, played in ``folder`` holding the script and
    the example it uses: their exit codes, and the logs its first command wrote there with inspect
    itself (seed.eval, terse.eval at seed 0, terse-again.json at seed 1)."""
    (folder / "tests").mkdir()
    shutil.copy(REPO / "tests" / "make_inspect_logs.py", folder / "tests")
    shutil.copytree(
        REPO / "examples" / "inspect_task",
        folder / "examples" / "inspect_task",
        ignore=shutil.ignore_patterns(".capevolve", "__pycache__"),
    )
    ran = play((REPO / "docs" / "how-to" / "compare-inspect.md").read_text(encoding="utf-8"), folder)
    return [result.returncode for _, result in ran], folder / "logs"


def test_the_inspect_how_to_runs_as_written_and_its_live_logs_decide_as_a_gate(
    tmp_path: Path, compare_in_process
) -> None:
    """One test for the page and the logs it makes (one inspect run: as three tests, ``-n 2`` could
    hand them to both workers, and each made the logs): the page's commands exit as it says (the
    installed command, in child processes); a better prompt is accepted with its markdown; the same
    prompt run again is not, and its seeds are said to differ (those two asked in process)."""
    pytest.importorskip("inspect_ai", reason="needs the `inspect` extra")
    compare = compare_in_process
    exits, logs = inspect_how_to(tmp_path)
    assert exits == EXITS["inspect"]  # the numbers the page shows are the ones the command prints
    assert {"seed.eval", "terse.eval", "terse-again.json"} <= {path.name for path in logs.iterdir()}

    summary = logs / "summary.md"
    done = compare("seed.eval", "terse.eval", "--json", "--markdown", summary, cwd=logs)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    [row] = answer["comparisons"]
    assert row["decision"] == "accept" and row["n_tasks"] == 12 and row["delta_mean"] > 0
    assert row["p_method"] == "exact" and row["pairing"]["trials_by"] == "label"
    # both logs record inspect's --seed 0: the pairs share random numbers, and the answer says so
    assert row["pairing"]["seeds"] == "common"
    assert answer["baseline"]["source"] == "inspect" and answer["baseline"]["outcomes"] == 24
    text = summary.read_text(encoding="utf-8")
    assert "| terse.eval | **ACCEPT** | 12 |" in text
    assert "### What does not" in text and "nothing is sealed" in text
    assert "ACCEPT" in done.stderr  # the table went to stderr, the JSON alone to stdout

    done = compare("terse.eval", "terse-again.json", "--json", cwd=logs)
    assert done.returncode == 10, done.stderr
    [row] = json.loads(done.stdout)["comparisons"]
    assert row["decision"] == "reject" and row["pairing"]["seeds"] == "differ"
    assert row["candidate"]["source"] == "inspect"  # a .json inspect log, recognised by its content


def test_csv_runs_exit_as_a_gate_does(tmp_path: Path, compare_in_process) -> None:
    compare = compare_in_process

    def table(name: str, passes: dict[str, int]) -> Path:
        rows = [f"q{t},{k},{int(k < passes.get(f'q{t}', 0))}" for t in range(10) for k in range(2)]
        path = tmp_path / name
        path.write_text("task_id,trial,reward\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return path

    base = table("base.csv", {})
    better = table("better.csv", {f"q{t}": 2 for t in range(10)})
    same = table("same.csv", {})
    done = compare(base, better, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "better.csv  ACCEPT" in done.stdout and "what does not:" in done.stdout
    # two runs against one baseline, Holm across them: one reject makes the job fail with 10
    done = compare(base, better, same, cwd=tmp_path)
    assert done.returncode == 10, done.stdout
    # a run covering half the tasks cannot be judged: 11
    half = tmp_path / "half.csv"
    half.write_text("task_id,reward\n" + "".join(f"q{t},1\n" for t in range(5)), encoding="utf-8")
    assert compare(base, half, cwd=tmp_path).returncode == 11
    # a file that cannot be read: one error line, 4
    bad = tmp_path / "bad.csv"
    bad.write_text("task_id,reward\nq1,7\n", encoding="utf-8")
    done = compare(base, bad, cwd=tmp_path)
    assert done.returncode == 4 and done.stderr.startswith("error: ") and "outside [0, 1]" in done.stderr
    assert compare(base, cwd=tmp_path).returncode == 4  # one run is nothing to compare


def test_a_pass_fail_column_written_as_true_and_false_reads_as_1_and_0(
    tmp_path: Path, compare_in_process
) -> None:
    """A CSV of bools as pandas or the csv module write them (True/False) was refused, "not a
    number", where the same results as JSON Lines (true/false) were read: both decide alike now."""
    for name, words in (("words", ("False", "True")), ("numbers", ("0", "1"))):
        for run, passes in (("base", 2), ("cand", 8)):
            rows = [f"q{t},{words[int(t < passes)]}" for t in range(10)]
            (tmp_path / f"{run}_{name}.csv").write_text("task_id,passed\n" + "\n".join(rows) + "\n")
    said = compare_in_process(
        "base_words.csv", "cand_words.csv", "--scorer", "passed", "--json", cwd=tmp_path
    )
    again = compare_in_process(
        "base_numbers.csv", "cand_numbers.csv", "--scorer", "passed", "--json", cwd=tmp_path
    )
    assert said.returncode == again.returncode == 0, said.stderr
    [row], [same] = (json.loads(done.stdout)["comparisons"] for done in (said, again))
    assert (row["decision"], row["delta_mean"], row["p_value"]) == (same["decision"], 0.6, same["p_value"])


def test_trials_numbered_from_0_and_from_1_are_said_with_the_way_on(
    tmp_path: Path, compare_in_process
) -> None:
    """A new user's two files, one numbering its trials 0–2 and the other 1–3: paired by label, a
    third of each run had no partner and was weighed as missing, said only as a count. The answer
    names the labels and the way on, and the way on (no trial column in either) pairs every row."""
    compare = compare_in_process

    def table(name: str, first: int, *, labelled: bool = True) -> Path:
        head = "task_id,trial,reward" if labelled else "task_id,reward"
        rows = [
            f"q{t},{first + k},{(t + k) % 2}" if labelled else f"q{t},{(t + k) % 2}"
            for t in range(8)
            for k in range(3)
        ]
        path = tmp_path / name
        path.write_text(head + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return path

    said = "label a task's trials differently (task 'q0': baseline 0, 1, 2; candidate 1, 2, 3)"
    done = compare(
        table("from0.csv", 0), table("from1.csv", 1), "--markdown", tmp_path / "s.md", cwd=tmp_path
    )
    assert said in done.stdout and "16 rows of shared tasks have no partner" in done.stdout
    assert said in (tmp_path / "s.md").read_text(encoding="utf-8")  # the posted summary says it too
    done = compare(table("a.csv", 0, labelled=False), table("b.csv", 1, labelled=False), cwd=tmp_path)
    assert "differently" not in done.stdout and "no row in one file" not in done.stdout  # every row paired
    assert "differently" not in compare(table("again.csv", 0), table("same.csv", 0), cwd=tmp_path).stdout


# Each source's how-to page: the exit codes of its commands, in order (what a CI job branches on).
EXITS = {
    "inspect": [0, 0, 10, 4],
    "promptfoo": [4, 0],
    "deepeval": [10, 0],
    "lm-eval": [0, 4],
    "table": [0, 0, 0, 0, 11, 0, 4],
}


@pytest.mark.parametrize("source", sorted(set(EXITS) - {"inspect"}))
def test_each_sources_how_to_runs_as_written_on_the_committed_files(source: str, tmp_path: Path) -> None:
    """docs/how-to/compare-SOURCE.md's console blocks, played from a fresh folder laid out as the
    clone (tests/data/compare/: the files each real tool wrote): the page shows what the command
    prints and exits with, so it cannot claim what the reader does not do. Its commands named
    `table/baseline.csv` with no `cd`: pasted from the clone's root, each said "no such file"."""
    shutil.copytree(REPO / "tests" / "data" / "compare", tmp_path / "tests" / "data" / "compare")
    page = (REPO / "docs" / "how-to" / f"compare-{source}.md").read_text(encoding="utf-8")
    # pasted from the clone's root, as a reader does: the page's first command goes to the files
    assert "$ cd tests/data/compare" in page.split("```console", 2)[1], "the page starts nowhere"
    ran = play(page, tmp_path)
    assert [result.returncode for _, result in ran] == EXITS[source]


def test_the_dropped_fixture_names_the_command(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(capevolve_compare):\n    pass\n")
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*capevolve_compare fixture was dropped: run `capevolve compare A B`*"])


def test_a_margin_asks_no_worse_than_and_says_so_in_every_answer(tmp_path: Path, compare_in_process) -> None:
    """200 tasks: a cheaper run that swaps two wins for two losses is no worse than −0.05 (exit
    0) though not better; one that loses 20 tasks is not (10); equivalence at ±0.05 likewise."""
    compare = compare_in_process

    def table(name: str, flipped: range) -> Path:
        rows = [f"q{t},{int((t % 2 == 0) != (t in flipped))}" for t in range(200)]
        path = tmp_path / name
        path.write_text("task_id,reward\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return path

    base, cheap, worse = (
        table("base.csv", range(0)),
        table("cheap.csv", range(4)),
        table("worse.csv", range(0, 40, 2)),
    )
    assert compare(base, cheap, cwd=tmp_path).returncode == 10  # not better: the usual question
    done = compare(base, cheap, "--margin", "-0.05", "--markdown", tmp_path / "m.md", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["margin"] == -0.05 and answer["comparisons"][0]["decision"] == "accept"
    assert answer["comparisons"][0]["margin"]["kind"] == "non_inferiority"
    assert answer["comparisons"][0]["margin"]["lower"] > -0.05
    assert "no worse than -0.05" in (tmp_path / "m.md").read_text(encoding="utf-8")
    done = compare(base, worse, "--margin", "-0.05", cwd=tmp_path)
    assert done.returncode == 10 and "no worse than -0.05" in done.stdout
    assert compare(base, cheap, "--equivalence", "0.05", cwd=tmp_path).returncode == 0
    assert compare(base, worse, "--equivalence", "0.05", cwd=tmp_path).returncode == 10
    done = compare(base, cheap, "--margin", "0.02", cwd=tmp_path)
    assert done.returncode != 0 and "no worse than 0.02 below" in done.stderr  # the way on
