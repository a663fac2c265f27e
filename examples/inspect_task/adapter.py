"""An inspect_ai task gated by capevolve, offline: inspect's own mock model answers.

The capability is two files in the candidate folder, read by the task factory
(``arithmetic``): ``system_prompt.md`` (the system message) and ``solver.yaml`` (solver
parameters: here the generate config's ``temperature``). The dataset and the scorer
(inspect's ``exact()``) are the seed's for every candidate, by the bridge's rule.

The model is ``mockllm/model`` with ``custom_outputs``: a function of the messages and the
generate config, so its answers follow the system prompt (only a prompt that asks for "only
the final answer" gets a bare number, which is what ``exact()`` accepts) and slip by one now
and then, more often at a higher temperature, at the same samples for the same ``seed``
(common random numbers, as a sampled model with a seed would give).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import exact
from inspect_ai.solver import generate, system_message

from pytest_capevolve.bridges.inspect_task import InspectTaskAdapter, solver_params, system_prompt

QUESTIONS = [
    ("sum-a", "What is 17 + 25?", "42"),
    ("sum-b", "What is 38 * 3?", "114"),
    ("sum-c", "What is 91 - 46?", "45"),
    ("sum-d", "What is 12 * 12?", "144"),
    ("sum-e", "What is 250 + 175?", "425"),
    ("sum-f", "What is 63 - 27?", "36"),
    ("sum-g", "What is 14 * 15?", "210"),
    ("sum-h", "What is 808 - 99?", "709"),
    ("sum-i", "What is 45 + 67?", "112"),
    ("sum-j", "What is 9 * 13?", "117"),
    ("sum-k", "What is 300 - 123?", "177"),
    ("sum-l", "What is 56 + 78?", "134"),
]
DATASET = MemoryDataset([Sample(id=tid, input=question, target=gold) for tid, question, gold in QUESTIONS])
_SUM = re.compile(r"What is (\d+) ([+*-]) (\d+)\?")


def mock_model(messages, tools, tool_choice, config: GenerateConfig) -> ModelOutput:
    """What the mock model says (inspect's ``mockllm/model`` calls this for every generate)."""
    system = " ".join(m.text for m in messages if m.role == "system").lower()
    question = messages[-1].text
    match = _SUM.search(question)
    if match:
        a, op, b = int(match[1]), match[2], int(match[3])
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        temperature = 1.0 if config.temperature is None else config.temperature
        digest = hashlib.sha256(f"{config.seed}|{question}".encode()).digest()
        value += digest[0] < 100 * temperature  # a slip: about 2 in 5 at temperature 1
        answer = str(value)
    else:
        answer = "I do not know."
    text = (
        answer
        if "only the final answer" in system
        else f"Sure! Let me work that out. The answer is {answer}."
    )
    output = ModelOutput.from_content(model="mockllm/model", content=text)
    # usage given, so the mock never reaches for a tokenizer download to count it
    words_in = sum(len(m.text.split()) for m in messages)
    output.usage = ModelUsage(
        input_tokens=words_in, output_tokens=len(text.split()), total_tokens=words_in + len(text.split())
    )
    return output


def arithmetic(capability: Path) -> Task:
    """The inspect task for one candidate folder."""
    params = solver_params(capability)
    return Task(
        dataset=DATASET,
        solver=[system_message(system_prompt(capability)), generate()],
        scorer=exact(),
        config=GenerateConfig(temperature=float(params.get("temperature", 1.0))),
    )


class ArithmeticAdapter(InspectTaskAdapter):
    factory = staticmethod(arithmetic)
    model = "mockllm/model"
    model_args = {"custom_outputs": mock_model}
