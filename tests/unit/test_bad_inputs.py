"""Bad input gets one clear message naming the file, the key and the fix (exit 4, usage)."""

from __future__ import annotations

import pytest
from bad_input_cases import FLOAT_IDS, TASKS_NONE, TASKS_RAISE

from pytest_capevolve._cli.main import main  # numpy and scipy load once, here, not in each in-process session

# `capevolve check` on the same adapters: one line naming the adapter, exit 1, no traceback.
CHECK_CASES = {
    "tasks-raises": (
        TASKS_RAISE,
        "RaisingAdapter",
        "*FAIL  adapter adapter.py:RaisingAdapter: tasks('all') raised*",
    ),
    "tasks-not-a-list": (TASKS_NONE, "NoneAdapter", "*FAIL  *NoneAdapter: tasks('all') must return a list*"),
    "task-id-float": (FLOAT_IDS, "FloatIdAdapter", "*FAIL  *whose id 0.5 is a float*"),
}


@pytest.mark.parametrize("case", sorted(CHECK_CASES))
def test_check_names_the_adapter(example, projects, capsys, case: str) -> None:
    project = example("toy_calc")
    source, cls, expected = CHECK_CASES[case]
    projects.add_adapter(project, source, f"adapter.py:{cls}")
    assert main(["check", str(project)]) == 1
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert pytest.LineMatcher(out.splitlines()).fnmatch_lines([expected]) is None


# `capevolve gate` flags are checked as the spec checks the same keys (argparse: exit 2).
GATE_FLAGS = {
    "alpha-above-cap": (["--alpha", "0.9"], "*--alpha: must be a number in (0, 0.25]*got '0.9'*"),
    "alpha-negative": (["--alpha", "-1"], "*--alpha: must be a number in (0, 0.25]*got '-1'*"),
    "alpha-nan": (["--alpha", "nan"], "*--alpha: must be a number in (0, 0.25]*got 'nan'*"),
    "alpha-text": (["--alpha", "abc"], "*--alpha: must be a number*got 'abc'*"),
    "k-se-negative": (["--k-se", "-3"], "*--k-se: must be a number in [[]0, inf]*got '-3'*"),
}


@pytest.mark.parametrize("case", sorted(GATE_FLAGS))
def test_gate_flags_are_validated_as_the_spec_does(capsys, case: str) -> None:
    flags, expected = GATE_FLAGS[case]
    with pytest.raises(SystemExit) as exit_info:
        main(["gate", "careful", *flags])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert pytest.LineMatcher(err.splitlines()).fnmatch_lines([expected]) is None


# Every spec key with values it must refuse, each with the message it gets (load_spec, no session:
# these are the spec's own checks; CASES in tests/bad_input_cases.py shows the same messages reach
# a session as exit 4).
SPEC_VALUES = [
    ("adapter", "adapter.py", "'file.py:ClassName'"),
    ("adapter", "'adapter.py:'", "'file.py:ClassName'"),
    ("adapter", "adapter.txt:ToyCalcAdapter", "'file.py:ClassName'"),
    ("adapter", "missing.py:X", "which does not exist"),
    ("adapter", "''", "a non-empty string"),
    ("capability_path", "nowhere", "not an existing folder"),
    ("capability_path", "adapter.py", "not an existing folder"),
    ("capability_path", "7", "a non-empty string"),
    ("split_seed", "1.5", "a whole number"),
    ("split_seed", "yes", "a whole number"),
    ("split_train", "-0.1", "a number in [0, 1]"),
    ("split_train", "1.5", "a number in [0, 1]"),
    ("split_val", "0.0", "must sum to 1"),
    ("split_val", ".nan", "a number in [0, 1]"),
    ("split_test", "0.9", "must sum to 1"),
    ("split_test", "half", "a number in [0, 1]"),
    ("split_ids_file", "nope.json", "not an existing file"),
    ("split_ids_file", "[a, b]", "a non-empty string"),
    ("num_trials", "0", "a whole number ≥ 1"),
    ("num_trials", "-3", "a whole number ≥ 1"),
    ("num_trials", "2.5", "a whole number ≥ 1"),
    ("num_trials", "true", "a whole number ≥ 1"),
    ("num_trials", "'3'", "a whole number ≥ 1"),
    ("base_seed", "seed", "a whole number"),
    ("base_seed", "1e3", "a whole number"),
    ("success_threshold", "1.5", "a number in [0, 1]"),
    ("success_threshold", "-1", "a number in [0, 1]"),
    ("rollout_timeout_s", "0", "a number in (0, inf]"),
    ("rollout_timeout_s", "-5", "a number in (0, inf]"),
    ("rollout_timeout_s", "soon", "a number in (0, inf]"),
    ("concurrency", "0", "a whole number ≥ 1"),
    ("concurrency", "2.5", "a whole number ≥ 1"),
    ("concurrency", "many", "a whole number ≥ 1"),
    ("gate_mode", "bayes", "one of exact, paired"),
    ("gate_mode", "EXACT", "one of exact, paired"),
    ("gate_k_se", "-1", "a number in [0, inf]"),
    ("gate_k_se", "k", "a number in [0, inf]"),
    ("gate_alpha", "0", "a number in (0, 0.25]"),
    ("gate_alpha", "0.5", "a number in (0, 0.25]"),
    ("gate_alpha", "-0.05", "a number in (0, 0.25]"),
    ("gate_alpha", ".nan", "a number in (0, 0.25]"),
    ("gate_threshold", "2", "a number in [-1, 1]"),
    ("min_coverage", "1.2", "a number in [0, 1]"),
    ("min_coverage", "most", "a number in [0, 1]"),
    ("max_metric_calls", "-1", "a whole number ≥ 0"),
    ("max_metric_calls", "1.5", "a whole number ≥ 0"),
    ("max_usd", "-2", "a number in [0, inf]"),
    ("max_usd", "five", "a number in [0, inf]"),
    ("max_iterations", "-1", "a whole number ≥ 0"),
    ("stall", "0", "a whole number ≥ 1"),
    ("stop_condition", "''", "a non-empty string"),
    ("stop_condition", "[1, 2]", "a non-empty string"),
    ("protected_paths", "[1, 2]", "a list of glob patterns"),
    ("protected_paths", "{a: 1}", "a list of glob patterns"),
    ("gate_min_effect", "0.6", "a number in [0, 0.5]"),
    ("gate_min_effect", "-0.1", "a number in [0, 0.5]"),
    ("gate_alpha_schedule", "bonferroni", "one of constant, basel"),
    ("screen_alpha", "0", "a number in (0, 0.25]"),
    ("screen_alpha", "0.5", "a number in (0, 0.25]"),
    ("grow_max_looks", "0", "a whole number from 1 to 3"),
    ("grow_max_looks", "4", "a whole number from 1 to 3"),
    ("grow_max_looks", "2.5", "a whole number from 1 to 3"),
    ("shared_ledger", "no/such/folder/ledger.jsonl", "not a file in an existing folder"),
    ("shared_ledger", "capability", "not a file in an existing folder"),
    ("shared_ledger", "[a, b]", "a non-empty string"),
]


@pytest.mark.parametrize("key, value, message", SPEC_VALUES, ids=[f"{k}={v}" for k, v, _ in SPEC_VALUES])
def test_every_spec_key_refuses_bad_values_with_one_message(example, key, value, message) -> None:
    from pytest_capevolve._project.spec import SpecError, load_spec

    project = example("toy_calc")
    spec = project / "capevolve.yaml"
    kept = [line for line in spec.read_text().splitlines() if not line.startswith(f"{key}:")]
    spec.write_text("\n".join([*kept, f"{key}: {value}"]) + "\n")
    with pytest.raises(SpecError) as refused:
        load_spec(project)
    text = str(refused.value)
    assert str(spec) in text and message in text, text
    assert "\n" not in text  # one line
