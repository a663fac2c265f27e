"""Make the committed deepeval test-run files, offline: two runs of six test cases scored by a
deterministic custom metric (no LLM judge), saved by deepeval itself.

    pip install deepeval          # not a test dependency: the files are committed
    DEEPEVAL_TELEMETRY_OPT_OUT=YES python tests/data/compare/deepeval/make_deepeval_runs.py

writes ``deepeval_baseline.json`` and ``deepeval_candidate.json`` beside this script (each the
``test_run_*.json`` that deepeval's ``evaluate()`` saves in ``DEEPEVAL_RESULTS_FOLDER``). The
baseline's "agent" answers half the questions; the candidate answers five of six.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = [("2+2", "4"), ("3*3", "9"), ("10-7", "3"), ("6/2", "3"), ("5+8", "13"), ("9*9", "81")]
ANSWERS = {
    "baseline": ["4", "9", "3", "I think 3", "no idea", "eighty-one"],
    "candidate": ["4", "9", "3", "3", "13", "eighty-one"],
}


def main() -> None:
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    from deepeval import evaluate
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase

    class ExactAnswer(BaseMetric):
        """1 when the output is the expected answer, else 0: no model, no network."""

        def __init__(self) -> None:
            self.threshold = 1.0

        def measure(self, test_case: LLMTestCase, *args, **kwargs) -> float:
            self.score = float(test_case.actual_output.strip() == test_case.expected_output)
            self.success = self.score >= self.threshold
            self.reason = "exact" if self.success else f"expected {test_case.expected_output}"
            return self.score

        async def a_measure(self, test_case: LLMTestCase, *args, **kwargs) -> float:
            return self.measure(test_case)

        def is_successful(self) -> bool:
            return bool(self.success)

        @property
        def __name__(self) -> str:
            return "Exact Answer"

    for arm, answers in ANSWERS.items():
        folder = Path(tempfile.mkdtemp(prefix="deepeval-"))
        os.environ["DEEPEVAL_RESULTS_FOLDER"] = str(folder)
        os.chdir(folder)  # deepeval also keeps a .deepeval/ cache in the working directory
        cases = [
            LLMTestCase(name=f"q{i}", input=q, actual_output=a, expected_output=gold)
            for i, ((q, gold), a) in enumerate(zip(QUESTIONS, answers, strict=True))
        ]
        evaluate(test_cases=cases, metrics=[ExactAnswer()])
        [saved] = list(folder.glob("test_run_*.json"))
        shutil.move(saved, HERE / f"deepeval_{arm}.json")
        os.chdir(HERE)
        shutil.rmtree(folder)


if __name__ == "__main__":
    sys.exit(main())
