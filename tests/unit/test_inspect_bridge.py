"""The inspect_ai bridge (pytest_capevolve.bridges.inspect_task) on examples/inspect_task,
whose model is inspect's own mock (``mockllm/model`` with ``custom_outputs``): offline, seeded.

inspect's retry code passes tenacity a parameter tenacity now deprecates, and an eval leaves
anyio memory streams for the garbage collector to close (a ResourceWarning from their
``__del__``); both are inspect's, so they are let through here (the project's config makes
warnings errors), and each test collects its garbage before it ends, so what inspect left is
reported under this module's filters and never in a later test.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="needs the `inspect` extra (the compat venvs install only the core)")

from pytest_capevolve._project.adapter import AdapterError, Rollout, Task  # noqa: E402
from pytest_capevolve.bridges import inspect_task  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inspect_task"


def _example_module():
    spec = importlib.util.spec_from_file_location("inspect_example_adapter", EXAMPLE / "adapter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _example_module()


@pytest.fixture(autouse=True)
def collect_what_inspect_left():
    yield
    gc.collect()


@pytest.fixture(scope="module")
def adapter():
    return example.ArithmeticAdapter(EXAMPLE)


def _plain(rollout: Rollout) -> dict:
    return {k: v for k, v in vars(rollout).items() if k != "seconds"}


def test_each_sample_is_a_task_with_its_id_input_and_target(adapter):
    tasks = adapter.tasks("all")
    assert [t.id for t in tasks] == [tid for tid, _, _ in example.QUESTIONS]
    assert (tasks[0].input, tasks[0].target) == ("What is 17 + 25?", "42")


def test_a_batch_gives_the_records_one_eval_per_rollout_gives(adapter):
    """Eight rollouts in flight together are one inspect eval; one at a time they are eight;
    the rollouts (outputs, traces, tokens) are the same."""
    tasks = adapter.tasks("all")[:8]
    folder = EXAMPLE / "candidates" / "terse"

    async def together():
        return await asyncio.gather(*(adapter.run_target(t, folder, seed=5) for t in tasks))

    async def alone():
        return [await adapter.run_target(t, folder, seed=5) for t in tasks]

    before = adapter.evals
    batched = asyncio.run(together())
    assert adapter.evals - before == 1
    single = asyncio.run(alone())
    assert adapter.evals - before == 1 + 8
    assert [_plain(r) for r in batched] == [_plain(r) for r in single]
    assert all(r.error is None and r.tokens > 0 for r in batched)


def test_the_seed_is_the_generate_configs_seed(adapter):
    """Common random numbers: the mock slips at the samples its seed picks, so two seeds give
    two different answer sets, and one seed gives one."""
    tasks = adapter.tasks("all")
    folder = EXAMPLE / "candidates" / "terse"

    async def answers(seed):
        return [
            r.output for r in await asyncio.gather(*(adapter.run_target(t, folder, seed=seed) for t in tasks))
        ]

    first, again, other = asyncio.run(answers(1)), asyncio.run(answers(1)), asyncio.run(answers(2))
    assert first == again and first != other


def test_the_candidates_files_feed_the_solver_and_the_seeds_scorer_scores(adapter):
    task = adapter.tasks("all")[0]
    chatty = asyncio.run(adapter.run_target(task, EXAMPLE / "capability", seed=0))
    terse = asyncio.run(adapter.run_target(task, EXAMPLE / "candidates" / "terse_cool", seed=0))
    assert chatty.output.startswith("Sure!") and terse.output == "42"
    assert chatty.trace["messages"][0] == {
        "role": "system",
        "content": (EXAMPLE / "capability" / "system_prompt.md").read_text(),
    }
    assert asyncio.run(adapter.score(task, terse)).reward == 1.0
    assert asyncio.run(adapter.score(task, chatty)).reward == 0.0


def test_a_candidate_cannot_swap_the_scorer_or_the_dataset(tmp_path):
    """The candidate's factory result gives only its solver and config: a task factory that
    returns a lenient scorer and easier samples for a candidate changes neither."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes

    seed_dir, cheat = tmp_path / "capability", tmp_path / "cheat"
    for folder in (seed_dir, cheat):
        folder.mkdir()
        (folder / "system_prompt.md").write_text("Answer.")
    (cheat / "CHEAT").write_text("")

    def factory(capability: Path):
        made = example.arithmetic(capability)
        if (capability / "CHEAT").exists():
            easy = [Sample(id=s.id, input="What is 1 + 1?", target="2") for s in example.DATASET]
            return InspectTask(dataset=easy, solver=made.solver, scorer=includes(), config=made.config)
        return made

    adapter = example.ArithmeticAdapter(tmp_path, factory=factory)
    task = adapter.tasks("all")[0]
    rollout = asyncio.run(adapter.run_target(task, cheat, seed=0))
    assert "42" in rollout.output or "43" in rollout.output  # the seed's question, not the easy one
    # includes() would pass "... The answer is 42."; the seed's exact() does not
    assert asyncio.run(adapter.score(task, rollout)).reward == 0.0


@pytest.mark.parametrize(
    ("value", "reward"),
    [("C", 1.0), ("P", 0.5), ("I", 0.0), ("N", 0.0), (True, 1.0), (False, 0.0), (0.25, 0.25), (1, 1.0)],
)
def test_the_reward_mapping(adapter, value, reward):
    assert adapter.reward_of(value) == reward


@pytest.mark.parametrize("value", ["maybe", {"a": 1}, [1.0]])
def test_an_unmapped_value_is_refused_in_one_line(adapter, value):
    with pytest.raises(AdapterError, match="has no reward"):
        adapter.reward_of(value)


def test_a_sample_that_errors_in_inspect_is_an_infra_error_never_a_zero(tmp_path):
    def broken_model(messages, tools, tool_choice, config):
        raise RuntimeError("model API down")

    class Broken(example.ArithmeticAdapter):
        model_args = {"custom_outputs": broken_model}

    adapter = Broken(EXAMPLE)
    rollout = asyncio.run(adapter.run_target(adapter.tasks("all")[0], EXAMPLE / "capability", seed=0))
    assert rollout.error and "model API down" in rollout.error and rollout.output is None


def test_a_score_of_a_stored_rollout_needs_no_eval(adapter):
    """score() rebuilds inspect's TaskState from the persisted record alone."""
    before = adapter.evals
    stored = Rollout(
        task_id="sum-a", output="42", trace={"messages": [{"role": "user", "content": "What is 17 + 25?"}]}
    )
    score = asyncio.run(adapter.score(Task(id="sum-a", input="What is 17 + 25?", target="42"), stored))
    assert score.reward == 1.0 and adapter.evals == before


def test_the_capability_files_read_what_is_there(tmp_path):
    (tmp_path / "system_prompt.md").write_text("Be brief.")
    assert inspect_task.system_prompt(tmp_path) == "Be brief." and inspect_task.solver_params(tmp_path) == {}
    (tmp_path / "solver.yaml").write_text("- not a mapping\n")
    with pytest.raises(AdapterError, match="mapping"):
        inspect_task.solver_params(tmp_path)
    with pytest.raises(AdapterError, match="no other.md"):
        inspect_task.system_prompt(tmp_path, "other.md")
