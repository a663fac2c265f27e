"""Make the committed lm-evaluation-harness samples, offline: the task arith_mc (arith_mc.yaml,
ten multiple-choice questions in arith.jsonl) run by lm-eval's own CLI with two mock models
registered here: ``careful`` (the right answer's loglikelihood highest, except on two
questions) and ``sloppy`` (the right answer highest on three questions only).

    pip install lm-eval        # not a test dependency: the samples files are committed
    python tests/data/compare/lm_eval/make_lm_eval_samples.py

writes ``samples_arith_mc_careful.jsonl`` and ``samples_arith_mc_sloppy.jsonl`` beside this
script (lm-eval's ``samples_<task>_<time>.jsonl``, renamed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RIGHT = {"careful": set(range(10)) - {3, 7}, "sloppy": {0, 1, 2}}


def answers() -> dict[str, str]:
    """Each question's text → its right answer, from the dataset."""
    rows = [json.loads(line) for line in (HERE / "arith.jsonl").read_text().splitlines()]
    return {r["question"]: r["choices"][r["answer"]] for r in rows}


def main() -> None:
    from lm_eval.__main__ import cli_evaluate
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    os.chdir(HERE)  # arith_mc.yaml names its data file relative to the working directory
    gold = answers()
    order = list(gold)

    def mock(name: str) -> type[LM]:
        class Mock(LM):
            def __init__(self, *args, **kwargs) -> None:  # lm-eval passes batch_size, device
                super().__init__()

            def loglikelihood(self, requests, disable_tqdm: bool = False):
                out = []
                for request in requests:
                    context, continuation = request.arguments
                    question = re.search(r"Question: (.*)\nAnswer:", context)[1]
                    index = order.index(question)
                    right = continuation.strip() == gold[question]
                    good = right if index in RIGHT[name] else not right
                    out.append((-0.1 if good else -2.0, False))
                return out

            def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

            def generate_until(self, requests, disable_tqdm: bool = False):
                raise NotImplementedError

            @classmethod
            def create_from_arg_string(cls, arg_string, additional_config=None):
                return cls()

        register_model(f"mock-{name}")(Mock)
        return Mock

    for name in RIGHT:
        mock(name)
        out = Path(tempfile.mkdtemp(prefix="lm-eval-"))
        sys.argv = [
            "lm_eval", "--model", f"mock-{name}", "--tasks", "arith_mc", "--include_path", str(HERE),
            "--output_path", str(out), "--log_samples", "--seed", "0",
        ]  # fmt: skip
        cli_evaluate()
        [samples] = list(out.rglob("samples_arith_mc_*.jsonl"))
        shutil.move(samples, HERE / f"samples_arith_mc_{name}.jsonl")
        shutil.rmtree(out)


if __name__ == "__main__":
    main()
