"""Microcases: schema, the four check kinds as pytest items, the gate screen, and `gen`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from pytest_capevolve._cli.main import main
from pytest_capevolve._engine.checks import is_json_subset
from pytest_capevolve._project.microcase_gen import REDACTED, redact
from pytest_capevolve._store.record import RolloutRecord

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


LEAKY = '''

class LeakyCalcAdapter(ToyCalcAdapter):
    """A scorer whose feedback states the gold answer, as many do."""

    def score(self, task, rollout):
        ok = rollout.output == task.target
        return Score(reward=1.0 if ok else 0.0, feedback=f"expected {task.target}, got {rollout.output}")
'''


def test_gen_refuses_a_test_split_rollout(tmp_path, capsys):
    record = RolloutRecord(
        run_id="r", split="test", task_id="q00", tag="seed", trial=0, seed=0, candidate_hash="h", output=1
    )
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record.to_json()))
    assert main(["microcase", "gen", "--from", str(path), "--cluster", "c", "--project", str(tmp_path)]) == 4
    assert "test split is sealed" in capsys.readouterr().err


def test_redact_replaces_standalone_gold_only():
    assert redact("expected 36, got 37", 36) == f"expected {REDACTED}, got 37"
    assert redact("answered 361 to '4 * 9'", 36) == "answered 361 to '4 * 9'"
    assert redact("the answer is Paris.", "Paris") == f"the answer is {REDACTED}."
    assert redact("nothing to hide", None) == "nothing to hide"


def test_json_subset():
    assert is_json_subset({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 2, "d": 3}, "e": 4})
    assert not is_json_subset({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}})
    assert not is_json_subset({"a": 1}, [1])
    assert is_json_subset([1, 2], [1, 2]) and not is_json_subset([1], [1, 2])


def test_the_repositorys_microcases_cover_the_noisy_agent(repo):
    folder = repo / "microcases" / "noisy_agent"
    assert folder.resolve() == (repo / "examples" / "noisy_agent" / "microcases").resolve()
    kinds = {
        kind
        for path in folder.glob("*.yaml")
        for case in yaml.safe_load(path.read_text())
        for kind in ("text", "call", "score", "adapter")
        if kind in case
    }
    assert kinds == {"text", "call", "score", "adapter"}
    assert "microcases" in re.findall(r"testpaths = \[(.*)\]", (repo / "pyproject.toml").read_text())[0]
