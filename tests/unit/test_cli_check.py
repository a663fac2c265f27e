"""`capevolve check PROJECT`: the contract verified before any money is spent."""

from __future__ import annotations

import pytest

from pytest_capevolve._cli.main import main


@pytest.mark.parametrize("name", ["toy_calc", "noisy_agent"])
def test_check_passes_on_the_examples(examples, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(examples / name)]) == 0
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
