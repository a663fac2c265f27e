"""Microcases: schema, the four check kinds as pytest items, the gate screen, and `gen`."""

from __future__ import annotations

import json
import re

import yaml

from pytest_capevolve._cli.main import main
from pytest_capevolve._engine.checks import is_json_subset
from pytest_capevolve._project.microcase_gen import REDACTED, redact
from pytest_capevolve._store.rollouts.record import RolloutRecord


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
