"""Microcases: schema, the four check kinds as pytest items, the gate screen, and `gen`."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from run_log import rollout_files

from pytest_capevolve._cli.main import main
from pytest_capevolve._project.microcase_gen import REDACTED

NO_CACHE = ["-p", "no:cacheprovider"]

CALC_TOOL = """
import time

def add(a, b):
    return a + b

def divide(a, b):
    return a / b

def describe(x):
    print("chatty tools print; stdout must not break the check")
    return {"value": x, "kind": "number", "meta": {"unit": "none", "exact": True}}

def hang():
    time.sleep(60)
"""

# Against toy_calc's seed (whose prompt lacks "Multiply carefully"), each kind once passing
# and once failing; the ids say which.
KINDS = """
- id: text-pass
  cluster: prompt
  description: The prompt asks for one integer.
  text: {file: prompt.md, contains: single integer, not_contains: essay, matches: "(?m)^# Calc", max_bytes: 4096}
- id: text-fail
  cluster: multiplication
  description: Multiplication needs care.
  text: {file: prompt.md, contains: Multiply carefully}
- id: text-size-fail
  cluster: prompt-bloat
  description: Keep it tiny.
  text: {file: prompt.md, max_bytes: 10}
- id: call-pass
  cluster: tools
  description: add adds.
  call: {function: tools/calc.py:add, args: [2, 3], expect: {equals: 5}}
- id: call-raises-pass
  cluster: tools
  description: divide by zero raises.
  call: {function: tools/calc.py:divide, args: [1, 0], expect: {raises: ArithmeticError}}
- id: call-subset-pass
  cluster: tools
  description: describe keeps its shape.
  call: {function: tools/calc.py:describe, args: [4], expect: {json_subset: {kind: number, meta: {unit: none}}}}
- id: call-matches-pass
  cluster: tools
  description: describe mentions the number.
  call: {function: tools/calc.py:describe, kwargs: {x: 42}, expect: {matches: '"value": 42'}}
- id: call-fail
  cluster: tools
  description: add must not be off by one.
  call: {function: tools/calc.py:add, args: [2, 3], expect: {equals: 6}}
- id: call-raises-fail
  cluster: tools
  description: add of strings should raise (it does not).
  call: {function: tools/calc.py:add, args: ["a", "b"], expect: {raises: TypeError}}
- id: call-timeout-fail
  cluster: tools
  description: hang never returns.
  call: {function: tools/calc.py:hang, timeout_s: 1, expect: {equals: null}}
- id: score-pass
  cluster: scorer
  description: The right sum scores 1.
  score: {task: q00, output: 10, reward: 1.0}
- id: score-rollout-fail
  cluster: scorer
  description: A stored wrong answer must score 1 (it does not).
  score: {rollout: wrong.json, reward: {min: 1.0}}
- id: adapter-pass
  cluster: addition
  description: The seed adds.
  adapter: {task: q00, seed: 0, reward: 1.0}
- id: adapter-fail
  cluster: multiplication
  description: The seed multiplies wrongly.
  adapter: {task: q01, reward: {min: 1.0}}
"""


@pytest.fixture
def calc_project(example) -> Path:
    """toy_calc with a tool file and a microcase of every kind, passing and failing."""
    project = example("toy_calc")
    prompt = project / "capability" / "prompt.md"
    prompt.write_text(prompt.read_text().replace("# Calculator agent", "# Calc agent"))
    (project / "capability" / "tools").mkdir()
    (project / "capability" / "tools" / "calc.py").write_text(CALC_TOOL)
    (project / "microcases").mkdir()
    (project / "microcases" / "kinds.yaml").write_text(KINDS)
    (project / "microcases" / "wrong.json").write_text(json.dumps({"task_id": "q00", "output": 11}))
    return project


def test_every_check_kind_passes_and_fails_as_an_item(pytester, calc_project, xdist_args):
    project = calc_project
    result = pytester.runpytest(str(project / "microcases"), *NO_CACHE, *xdist_args)
    failing = [c["id"] for c in yaml.safe_load(KINDS) if "fail" in c["id"]]
    result.assert_outcomes(passed=len(yaml.safe_load(KINDS)) - len(failing), failed=len(failing))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    expected = {
        "text-fail": "(cluster multiplication) on candidate 'seed': expected prompt.md to contain 'Multiply carefully', got no such text",
        "text-size-fail": "expected prompt.md to be at most 10 bytes, got",
        "call-fail": "expected tools/calc.py:add(*[2, 3], **{}) equals 6, got 5",
        "call-raises-fail": "raises TypeError, got returned ab",
        "call-timeout-fail": "got no result within timeout_s=1",
        "score-rollout-fail": "expected reward in [1, 1] for task 'q00', got reward 0 (answered 11 to '3 + 7')",
        "adapter-fail": "(cluster multiplication) on candidate 'seed': expected reward in [1, 1] for task 'q01', got reward 0",
    }
    for case_id, message in expected.items():
        assert f"microcase {case_id} " in out and message in out, (case_id, out)
    assert f"FAILED {project.name}/microcases/kinds.yaml::text-fail[seed]" in out
    # a microcase the seed fails is a guard written wrong: said where it fails, with the check that says so
    sections = out.split("short test summary info")[0]  # under CI=true the summary repeats each message
    assert sections.count("the seed fails it: a microcase guards what the seed already does right") == len(
        failing
    )
    assert f"(`capevolve check {project.name}` says so)" in out


@pytest.mark.unconfined
def test_a_call_microcase_run_without_a_boundary_says_so_in_the_words_of_a_rollout(pytester, example):
    """Unconfined on purpose: where the kernel gives no boundary (or refused its rules), the call ran
    candidate code outside one, and its result says so as a sandbox child's rollouts do."""
    project = example("toy_calc")
    (project / "capability" / "tools").mkdir()
    (project / "capability" / "tools" / "calc.py").write_text(CALC_TOOL)
    (project / "microcases").mkdir()
    (project / "microcases" / "add.yaml").write_text(
        "id: add-wrong\ncluster: addition\ndescription: d\n"
        "call: {function: tools/calc.py:add, args: [2, 3], expect: {equals: 6}}\n"
    )
    result = pytester.runpytest(str(project / "microcases"), *NO_CACHE, "--junitxml=out.xml")
    result.assert_outcomes(failed=1)
    label = "unconfined (Landlock turned off by CAPEVOLVE_LANDLOCK=off)"  # a rollout's, the same way
    assert f"got 5 (the call ran {label})" in result.stdout.str()
    assert f'<property name="confinement" value="{label}" />' in (pytester.path / "out.xml").read_text()


def test_the_candidate_option_picks_what_is_checked(pytester, calc_project):
    project = calc_project
    careful = project / "candidates" / "careful"
    shutil.copytree(project / "capability" / "tools", careful / "tools")
    result = pytester.runpytest(
        str(project / "microcases"),
        "--capevolve-candidate",
        str(careful),
        "-k",
        "text-fail or adapter",
        *NO_CACHE,
    )
    result.assert_outcomes(passed=3)  # careful multiplies: text-fail and adapter-fail pass on it
    result.stdout.no_fnmatch_line("*[[]seed[]]*")


MALFORMED = [
    ("id: a\n  cluster: [", "malformed YAML"),
    ("just a string\n", "holds one microcase mapping or a list of them"),
    ("[]\n", "holds one microcase mapping or a list of them"),
    (
        "id: a\nclustr: x\ndescription: d\ntext: {file: p.md, contains: x}\n",
        "unknown key 'clustr' (did you mean 'cluster'?)",
    ),
    ("id: a\ndescription: d\ntext: {file: p.md, contains: x}\n", "'cluster' is required"),
    (
        "id: a\ncluster: c\ndescription: d\n",
        "needs exactly one check, one of text, call, score, adapter (found: none)",
    ),
    (
        "id: a\ncluster: c\ndescription: d\ntext: {file: p.md, contains: x}\ncall: {function: t.py:f, expect: {equals: 1}}\n",
        "needs exactly one check, one of text, call, score, adapter (found: text, call)",
    ),
    ("id: a\ncluster: c\ndescription: d\ntext: {file: p.md}\n", "say what to check"),
    (
        "id: a\ncluster: c\ndescription: d\ntext: {file: p.md, matches: '(unclosed'}\n",
        "is not a valid regular expression",
    ),
    (
        "id: a\ncluster: c\ndescription: d\ntext: {file: ../secret.md, contains: x}\n",
        "leaves the candidate folder",
    ),
    (
        "id: a\ncluster: c\ndescription: d\ncall: {function: tools/x.py, expect: {equals: 1}}\n",
        "'function' must be 'path/to/file.py:name'",
    ),
    (
        "id: a\ncluster: c\ndescription: d\ncall: {function: t.py:f, expect: {equals: 1, contains: 2}}\n",
        "'expect' must hold exactly one of",
    ),
    (
        "id: a\ncluster: c\ndescription: d\nscore: {task: q00, output: 1, reward: {min: 1.0, max: 0.5}}\n",
        "min 1.0 is above max 0.5",
    ),
    ("id: a\ncluster: c\ndescription: d\nadapter: {task: q00, reward: 2}\n", "must be a number in [0, 1]"),
    (
        "id: a\ncluster: c\ndescription: d\nscore: {task: q00, output: 1, rollout: r.json, reward: 1}\n",
        "exactly one of 'output'",
    ),
    (
        "id: a\ncluster: c\ndescription: d\nadapter: {task: q00, reward: {min: FILL_IN}}\n",
        "adapter.reward.min is still FILL_IN",
    ),
    (
        "- id: a\n  cluster: c\n  description: d\n  text: {file: p.md, contains: x}\n" * 2,
        "microcase id 'a' appears twice",
    ),
    ("id: a b\ncluster: c\ndescription: d\ntext: {file: p.md, contains: x}\n", "'id' must be 1-100 letters"),
]


@pytest.mark.parametrize("content, message", MALFORMED, ids=[m[1][:30] for m in MALFORMED])
def test_malformed_microcase_files_are_refused_with_a_message(pytester, example, content, message):
    project = example("toy_calc")
    (project / "microcases").mkdir()
    bad = project / "microcases" / "bad.yaml"
    bad.write_text(content)
    result = pytester.runpytest(str(project / "microcases"), *NO_CACHE)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    out = result.stdout.str()
    assert message in out, out
    assert str(bad) in out  # the message names the file
    assert "Traceback" not in out


def test_a_microcase_file_outside_any_project_is_refused(pytester):
    (pytester.path / "microcases").mkdir()
    (pytester.path / "microcases" / "x.yaml").write_text(
        "id: a\ncluster: c\ndescription: d\ntext: {file: p, contains: x}\n"
    )
    result = pytester.runpytest("microcases", *NO_CACHE)
    result.stdout.fnmatch_lines(["*no capevolve.yaml in any folder above it*"])


def test_a_failing_microcase_rejects_before_any_rollout(example, projects, capevolve):
    """In process: the screens run on the controller alone, while it plans; their one case under
    -n 2 is test_tamper.py's (a candidate refused before any rollout, the same path)."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")
    broken = project / "candidates" / "broken-tool"
    shutil.copytree(project / "candidates" / "improved", broken)
    reply = broken / "tools" / "reply.py"
    reply.write_text(reply.read_text().replace('"refund": "Your refund is on its way."', '"refund": "Done."'))
    # no null controls: the screens' verdicts and improved's accept are asked, not the noise floor
    # (two copies of the seed paid 160 rollouts no assertion reads)
    no_nulls = ["--capevolve-null", "0"]
    result = capevolve(project, "regressed", "broken-tool", "improved", gate=True, extra=no_nulls)
    assert result.ret == 10, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*regressed*REJECT*failed 1 of 10 microcases before any rollout: no-upsell (cluster upsell)*",
            "*broken-tool*REJECT*refund-closing (cluster reply-tool) expected tools/reply.py:closing_line*",
        ]
    )
    rundir = projects.run_dir(project)
    for tag, failed in (("regressed", ["no-upsell"]), ("broken-tool", ["refund-closing"])):
        verdict = json.loads((rundir / "verdicts" / f"{tag}.json").read_text())
        assert verdict["basis"] == "micro_test_fail" and verdict["decision"] == "reject"
        assert [f["id"] for f in verdict["details"]["failed_microcases"]] == failed
        assert not rollout_files(rundir, tag)
        assert not (rundir / "candidates" / tag).exists()
    improved = json.loads((rundir / "verdicts" / "improved.json").read_text())
    assert improved["n_tasks"] == 40 and improved["decision"] == "accept"
    events = [json.loads(x) for x in (rundir / "events.jsonl").read_text().splitlines()]
    screened = {e["tag"]: e["failed"] for e in events if e["kind"] == "microcases"}
    assert screened == {"regressed": ["no-upsell"], "broken-tool": ["refund-closing"], "improved": []}


def test_microcases_may_not_use_test_tasks(toy_calc_baseline, pytester, projects, capevolve):
    project = toy_calc_baseline
    test_task = json.loads((projects.run_dir(project) / "splits.json").read_text())["test"][0]
    (project / "microcases").mkdir()
    (project / "microcases" / "leak.yaml").write_text(
        f"id: leak\ncluster: c\ndescription: d\nadapter: {{task: {test_task}, reward: 1.0}}\n"
    )
    as_items = pytester.runpytest(str(project / "microcases"), *NO_CACHE)
    as_items.stdout.fnmatch_lines([f"*uses task '{test_task}', which is in the sealed test split*"])
    # a microcase added mid-run is a changed harness (refused as such); a new run of the same
    # splits meets the microcase itself, and refuses it for the task it uses
    gated = capevolve(project, "careful", gate=True, extra=["--capevolve-new-run"])
    assert gated.ret == pytest.ExitCode.USAGE_ERROR
    gated.stderr.fnmatch_lines(["*sealed test split*"])


def test_gen_writes_a_skeleton_that_runs_once_filled_in(
    pytester, toy_calc_baseline, projects, capevolve, capsys
):
    """In process (microcases as items under xdist: test_every_check_kind_passes_and_fails_as_an_item)."""
    project = toy_calc_baseline
    records = {
        p: json.loads(p.read_text()) for p in (projects.run_dir(project) / "rollouts" / "val").glob("*.json")
    }
    source = sorted(p for p, r in records.items() if not r["passed"] and " * " in r["input"])[0]
    record = records[source]
    assert main(["microcase", "gen", "--from", str(source), "--cluster", "arithmetic"]) == 0
    written = project / "microcases" / f"arithmetic-{record['task_id']}.yaml"
    text = written.read_text()
    assert "FILL_IN" in text and record["feedback"] in text and f"task: {record['task_id']}" in text
    assert f"origin: val/{record['task_id']}/seed/t0" in text

    unfilled = pytester.runpytest(str(project / "microcases"), *NO_CACHE)
    unfilled.stdout.fnmatch_lines(["*adapter.reward.min is still FILL_IN*"])
    written.write_text(text.replace("min: FILL_IN", "min: 1.0"))
    careful = pytester.runpytest(
        str(project / "microcases"),
        "--capevolve-candidate",
        str(project / "candidates" / "careful"),
        *NO_CACHE,
    )
    seed = pytester.runpytest(str(project / "microcases"), *NO_CACHE)
    careful.assert_outcomes(passed=1)  # careful fixes multiplication
    seed.assert_outcomes(failed=1)  # the failure the microcase was made from
    seed.stdout.fnmatch_lines(
        [f"*microcase arithmetic-{record['task_id']} (cluster arithmetic) on candidate 'seed'*"]
    )
    # a second gen for the same rollout refuses to overwrite the filled-in file
    assert main(["microcase", "gen", "--from", str(source), "--cluster", "arithmetic"]) == 4


LEAKY = '''

class LeakyCalcAdapter(ToyCalcAdapter):
    """A scorer whose feedback states the gold answer, as many do."""

    def score(self, task, rollout):
        ok = rollout.output == task.target
        return Score(reward=1.0 if ok else 0.0, feedback=f"expected {task.target}, got {rollout.output}")
'''


def test_gen_never_copies_the_gold_answer(example, projects, capevolve, capsys):
    project = example("toy_calc")
    projects.add_adapter(project, LEAKY, "adapter.py:LeakyCalcAdapter")
    capevolve(project)
    rollouts = sorted((projects.run_dir(project) / "rollouts" / "val").glob("*.json"))
    source = next(p for p in rollouts if not json.loads(p.read_text())["passed"])
    record = json.loads(source.read_text())
    gold = str(record["feedback"].split()[1].rstrip(","))
    assert main(["microcase", "gen", "--from", str(source), "--cluster", "c", "--id", "leak-check"]) == 0
    text = (project / "microcases" / "leak-check.yaml").read_text()
    assert REDACTED in text
    assert str(project) not in text and "# Skeleton from .capevolve/runs/" in text  # no path of this machine
    assert not re.search(rf"(?<![\w.]){re.escape(gold)}(?!\w)", text), text
    # and never into the capability folder, where the candidate reads
    inside = project / "capability" / "case.yaml"
    assert main(["microcase", "gen", "--from", str(source), "--cluster", "c", "--out", str(inside)]) == 4
    assert not inside.exists()
    assert "where a candidate reads" in capsys.readouterr().err


def test_the_ci_recipe_and_its_page_branch_on_every_code_a_gate_session_ends_with(repo):
    """A gate of bytes an earlier run accepted exits 15 (a repeat), and the recipe's `case` printed
    "::error::usage or spec error (exit 15)"; the page's copy of it, the same."""
    from pytest_capevolve import exitcodes

    gate_codes = {exitcodes.REJECTED, exitcodes.INDECISIVE, exitcodes.INFRA_FAILURE}
    gate_codes |= {exitcodes.PROVISIONAL, exitcodes.REPEATED}
    for text in (
        (repo / "examples" / "ci" / "github-actions.yml").read_text(),
        (repo / "docs" / "how-to" / "ci.md").read_text(),
    ):
        branched = {int(code) for code in re.findall(r"^\s*(\d+)\)\s+echo", text, re.M)}
        assert gate_codes | {exitcodes.OK} <= branched, sorted(branched)


def test_the_ci_recipe_uses_only_real_options(pytester, repo):
    recipe = yaml.safe_load((repo / "examples" / "ci" / "github-actions.yml").read_text())
    runs = "\n".join(step.get("run", "") for job in recipe["jobs"].values() for step in job["steps"])
    assert "pytest microcases" in runs and "--capevolve-gate" in runs
    help_text = pytester.runpytest("--help").stdout.str()
    for flag in set(re.findall(r"--capevolve-[a-z-]+", runs)):
        assert flag in help_text, flag
    for command in set(re.findall(r"capevolve (\w+) ", textwrap.dedent(runs))):
        assert command in {"measure", "gate", "plan", "check", "verify", "microcase", "commit"}, command
