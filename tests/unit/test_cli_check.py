"""`capevolve check PROJECT`: the contract verified before any money is spent."""

from __future__ import annotations

import pytest

from pytest_capevolve._cli.main import main


@pytest.mark.parametrize("name", ["toy_calc", "noisy_agent"])
def test_check_passes_on_the_examples(example, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # a copy without the run the README's first command leaves in examples/noisy_agent: that run's harness
    # lock has no PYTEST_PLUGINS, which the suite's lean sessions set (tests/conftest.py), so checking the
    # folder itself failed when the README's two commands ran in order
    assert main(["check", str(example(name))]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "score is deterministic on a re-score" in out


def test_check_finds_a_nondeterministic_scorer(example, projects, capsys: pytest.CaptureFixture[str]) -> None:
    project = example("toy_calc")
    projects.add_adapter(
        project,
        "\nimport itertools\n_n = itertools.count()\n"
        "class Flaky(ToyCalcAdapter):\n"
        "    def score(self, task, rollout):\n"
        "        return Score(reward=float(next(_n) % 2))\n",
        "adapter.py:Flaky",
    )
    assert main(["check", str(project)]) == 1
    assert "FAIL  score is not deterministic" in capsys.readouterr().out


def test_check_finds_unstable_tasks(example, projects, capsys: pytest.CaptureFixture[str]) -> None:
    project = example("toy_calc")
    projects.add_adapter(
        project,
        "\nclass Shifty(ToyCalcAdapter):\n"
        "    calls = 0\n"
        "    def tasks(self, split):\n"
        "        Shifty.calls += 1\n"
        "        return super().tasks(split)[: 10 + Shifty.calls]\n",
        "adapter.py:Shifty",
    )
    assert main(["check", str(project)]) == 1
    assert "different tasks on a second call" in capsys.readouterr().out


def test_check_says_before_paying_when_a_margin_is_out_of_reach_or_not_read(
    example, projects, capsys: pytest.CaptureFixture[str]
) -> None:
    # a new user set gate_margin: -0.1 on 25 val tasks, check said ok, and the gate paid 300
    # rollouts to answer "cannot be shown here"; with gate_mode: pairwise check said ok and the
    # gate session refused the margin
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_margin: -0.01")
    assert main(["check", str(project)]) == 0  # a better candidate still passes: a note, not a FAIL
    out = capsys.readouterr().out
    assert "note  gate_margin -0.01: on " in out and "a candidate only as good as the best is rejected" in out
    projects.edit_spec(project, "gate_margin: -0.01", "gate_margin: -0.9")
    assert main(["check", str(project)]) == 0
    assert "gate_margin" not in capsys.readouterr().out  # within reach: nothing to say
    projects.edit_spec(project, "gate_margin: -0.9", "gate_margin: -0.9\ngate_mode: significant")
    assert main(["check", str(project)]) == 1
    assert "FAIL  gate_margin -0.9 is tested by the exact gate only" in capsys.readouterr().out
