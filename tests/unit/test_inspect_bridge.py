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
import functools
import gc
import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("inspect_ai") is None:  # asked without importing it (below)
    pytest.skip("needs the `inspect` extra (the compat venvs install only the core)", allow_module_level=True)

from pytest_capevolve._project.adapter import AdapterError, Rollout, Task  # noqa: E402


def bridge():
    """pytest_capevolve.bridges.inspect_task, imported when a test first asks (it imports
    inspect_ai, ~2 CPU-s): every xdist worker collects this file, and pytest reads every
    module-level name while it does, so neither the bridge nor the example is kept in one; only
    a worker that runs these tests pays the import."""
    return importlib.import_module("pytest_capevolve.bridges.inspect_task")


pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inspect_task"


@functools.cache
def inspect_example():
    """examples/inspect_task/adapter.py, loaded on first use (it imports inspect_ai: ``bridge``)."""
    spec = importlib.util.spec_from_file_location("inspect_example_adapter", EXAMPLE / "adapter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def _older_objects_frozen():
    """What exists before this module's first test (the suite's and inspect's own objects) is
    garbage-collected once and frozen: each test's collection below then walks only what was
    made since, not the whole heap (a full walk with inspect loaded cost a fifth of a second a
    test, more late in a whole suite). Both modules are loaded first, so inspect is among them."""
    assert bridge().InspectTaskAdapter and inspect_example().ArithmeticAdapter  # loaded before the freeze
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def collect_what_inspect_left(_older_objects_frozen):
    yield
    gc.collect()


@pytest.fixture(scope="module")
def adapter():
    return inspect_example().ArithmeticAdapter(EXAMPLE)


def _plain(rollout: Rollout) -> dict:
    return {k: v for k, v in vars(rollout).items() if k != "seconds"}


def test_each_sample_is_a_task_with_its_id_input_and_target(adapter):
    tasks = adapter.tasks("all")
    assert [t.id for t in tasks] == [tid for tid, _, _ in inspect_example().QUESTIONS]
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


@pytest.mark.attack(
    "candidate-code",
    attack="an inspect_ai solver factory that swaps in a lenient scorer or easier samples",
    outcome="prevented: the seed's dataset and scorer always score",
)
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
        made = inspect_example().arithmetic(capability)
        if (capability / "CHEAT").exists():
            easy = [Sample(id=s.id, input="What is 1 + 1?", target="2") for s in inspect_example().DATASET]
            return InspectTask(dataset=easy, solver=made.solver, scorer=includes(), config=made.config)
        return made

    adapter = inspect_example().ArithmeticAdapter(tmp_path, factory=factory)
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

    class Broken(inspect_example().ArithmeticAdapter):
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
    assert bridge().system_prompt(tmp_path) == "Be brief." and bridge().solver_params(tmp_path) == {}
    (tmp_path / "solver.yaml").write_text("- not a mapping\n")
    with pytest.raises(AdapterError, match="mapping"):
        bridge().solver_params(tmp_path)
    with pytest.raises(AdapterError, match="no other.md"):
        bridge().system_prompt(tmp_path, "other.md")


def _grading_adapter(tmp_path: Path, scorer, seen: list):
    """The example's task with a model-graded scorer, graded by a stand-in judge (inspect's mock
    model) that records the seed of every generate config it gets and grades by that seed."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.model import ModelOutput, ModelUsage

    (tmp_path / "capability").mkdir()
    (tmp_path / "capability" / "system_prompt.md").write_text("Reply with only the final answer.")

    def judge(messages, tools, tool_choice, config):
        seen.append(config.seed)
        grade = "C" if config.seed is None or config.seed % 3 else "I"
        output = ModelOutput.from_content(model="mockllm/model", content=f"GRADE: {grade}")
        output.usage = ModelUsage(input_tokens=1, output_tokens=2, total_tokens=3)
        return output

    def factory(capability: Path):
        made = inspect_example().arithmetic(capability)
        return InspectTask(dataset=made.dataset, solver=made.solver, scorer=scorer(), config=made.config)

    class Graded(inspect_example().ArithmeticAdapter):
        stochastic_score = True
        grader = "mockllm/model"
        grader_args = {"custom_outputs": judge}

    return Graded(tmp_path, factory=factory)


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "an LLM judge re-scored with no seed (a grader named inside the inspect scorer), so the "
        "judge's share reads 0 %"
    ),
    outcome="refused in one line; the bridge's grader gets seed `s + 1000003·j`",
)
def test_the_judge_seed_reaches_a_model_graded_scorers_grader(tmp_path):
    """Each re-score j of a rollout at seed s reaches the grader's generate config as
    s + 1000003·j: different per re-score, the same for the same seed (so the judge's share of
    the variance is measured, not 0 % because every re-score repeated one unseeded draw)."""
    from inspect_ai.scorer import model_graded_qa

    from pytest_capevolve._engine.judging import score_rollout_async

    seen: list = []
    adapter = _grading_adapter(tmp_path, model_graded_qa, seen)
    task = adapter.tasks("all")[0]
    rollout = Rollout(task_id=task.id, output="42", trace={"messages": []})

    def judged(seed):
        return asyncio.run(score_rollout_async(adapter, task, rollout, seed=seed, rescores=3))

    first = judged(7)
    assert seen == [7, 7 + 1_000_003, 7 + 2 * 1_000_003] == first.judge["seeds"]
    # the grades follow the seeds the judge saw (seed % 3 == 0 grades I): not one draw repeated
    assert first.judge["rewards"] == [1.0 if s % 3 else 0.0 for s in seen]
    again = judged(7)
    assert seen[3:] == seen[:3] and again.judge == first.judge
    judged(8)
    assert seen[6:] == [8, 8 + 1_000_003, 8 + 2 * 1_000_003]
    # nothing leaked into this context: no active model is left behind by score()
    from inspect_ai.model._model import active_model

    assert active_model() is None


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "an LLM judge re-scored with no seed (a grader named inside the inspect scorer), so the "
        "judge's share reads 0 %"
    ),
)
def test_a_stochastic_scorer_that_names_its_own_grader_is_refused(tmp_path):
    """model_graded_qa(model=...) resolves its grader itself: the judge seed cannot reach it,
    so a stochastic_score adapter whose scorer never called the bridge's grader is refused in
    one line, never re-scored r times with one unseeded draw."""
    from inspect_ai.model import ModelOutput, ModelUsage
    from inspect_ai.scorer import model_graded_qa

    def own(messages, tools, tool_choice, config):
        output = ModelOutput.from_content(model="mockllm/model", content="GRADE: C")
        output.usage = ModelUsage(input_tokens=1, output_tokens=2, total_tokens=3)
        return output

    from inspect_ai.model import get_model

    named = get_model("mockllm/model", memoize=False, custom_outputs=own)
    adapter = _grading_adapter(tmp_path, lambda: model_graded_qa(model=named), [])
    task = adapter.tasks("all")[0]
    rollout = Rollout(task_id=task.id, output="42", trace={"messages": []})
    with pytest.raises(AdapterError, match="no scorer generated with the grader the bridge seeds"):
        asyncio.run(adapter.score(task, rollout, seed=3))
    # a deterministic call (no judge seed) is scored as before
    assert asyncio.run(adapter.score(task, rollout)).reward == 1.0


def _echo_model(messages, tools, tool_choice, config):
    """A model that says whatever the system prompt tells it to say after 'Say: ' (so what
    reaches the prompt is what is scored): the stand-in for a model that reads its context."""
    from inspect_ai.model import ModelOutput, ModelUsage

    system = " ".join(m.text for m in messages if m.role == "system")
    said = system.split("Say: ", 1)[1].strip() if "Say: " in system else "nothing"
    output = ModelOutput.from_content(model="mockllm/model", content=said)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


@functools.cache
def _echo() -> type:
    """The example's adapter with ``_echo_model`` as its model, made on first use (its base class
    loads inspect)."""
    return type(
        "_Echo", (inspect_example().ArithmeticAdapter,), {"model_args": {"custom_outputs": _echo_model}}
    )


def _project(tmp_path: Path, prompt: str = "Say: 0") -> Path:
    (tmp_path / "capability").mkdir(exist_ok=True)
    (tmp_path / "capability" / "system_prompt.md").write_text(prompt)
    return tmp_path


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "a python file in an inspect_ai candidate folder, loaded by the factory, that answers with "
        "`state.target` (inspect hands every solver the gold)"
    ),
    outcome=(
        "prevented: the candidate's eval gets samples without a target; the scorer reads the gold from "
        "the task, in `score()`"
    ),
)
def test_a_candidates_python_file_that_reads_the_target_sees_none(tmp_path):
    """Attack: a factory that loads the candidate's own ``solver.py`` (as one optimizing solver
    code does) runs candidate code inside the eval, where inspect hands every solver
    ``state.target``. The cheat answers with the gold; the bridge's eval carries no target, so
    it answers nothing (the scorer still reads the gold, from the task, in score())."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.solver import generate, system_message

    _project(tmp_path)
    cheat = tmp_path / "cheat"
    cheat.mkdir()
    (cheat / "system_prompt.md").write_text("Say: 0")
    (cheat / "solver.py").write_text(
        "from inspect_ai.model import ModelOutput\n"
        "from inspect_ai.solver import solver\n\n"
        "@solver\n"
        "def answer():\n"
        "    async def solve(state, generate):\n"
        "        state.output = ModelOutput.from_content('mockllm/model', state.target.text)\n"
        "        return state\n"
        "    return solve\n"
    )

    def factory(capability: Path):
        steps = [system_message(bridge().system_prompt(capability)), generate()]
        if (capability / "solver.py").is_file():
            spec = importlib.util.spec_from_file_location(f"cand_{capability.name}", capability / "solver.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            steps = [module.answer()]
        return InspectTask(dataset=inspect_example().DATASET, solver=steps, scorer=inspect_example().exact())

    adapter = _echo()(tmp_path, factory=factory)
    task = adapter.tasks("all")[0]
    rollout = asyncio.run(adapter.run_target(task, cheat, seed=0))
    assert rollout.error is None and rollout.output == ""
    assert asyncio.run(adapter.score(task, rollout)).reward == 0.0
    assert asyncio.run(adapter.score(task, Rollout(task_id=task.id, output="42"))).reward == 1.0


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "an inspect_ai `system_prompt.md` with a placeholder (`{answer}`) that `system_message` fills "
        "from the sample's metadata, where the dataset keeps the gold"
    ),
    outcome=(
        "prevented: `system_prompt()` returns inert text (braces doubled; `template=True` to keep them)"
    ),
)
def test_a_placeholder_in_a_candidates_prompt_does_not_read_the_gold_from_metadata(tmp_path):
    """Attack: inspect's system_message fills {placeholders} from the sample's metadata; where
    the dataset keeps the gold there, a prompt 'Say: {answer}' is the gold. The helper's text is
    inert: the model sees '{answer}' as written."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.solver import generate, system_message

    dataset = MemoryDataset(
        [Sample(id=t, input=q, target=g, metadata={"answer": g}) for t, q, g in inspect_example().QUESTIONS]
    )

    def factory(capability: Path):
        prompt = bridge().system_prompt(capability)
        return InspectTask(
            dataset=dataset, solver=[system_message(prompt), generate()], scorer=inspect_example().exact()
        )

    project = _project(tmp_path)
    cheat = tmp_path / "cheat"
    cheat.mkdir()
    (cheat / "system_prompt.md").write_text("Say: {answer}")
    adapter = _echo()(project, factory=factory)
    task = adapter.tasks("all")[0]
    rollout = asyncio.run(adapter.run_target(task, cheat, seed=0))
    assert rollout.output == "{answer}" and asyncio.run(adapter.score(task, rollout)).reward == 0.0
    # a user who means placeholders says so, and the seed's own prompt is theirs
    (cheat / "system_prompt.md").write_text("Say: {{literal}}")
    assert bridge().system_prompt(cheat, template=True) == "Say: {{literal}}"


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "an inspect_ai `system_prompt.md` that is a path to a file of gold answers, or a URL "
        "(`system_message` reads it in the prompt's place)"
    ),
    outcome=(
        "refused: each of its rollouts is an infra error saying so in one line (missing data, never a reward)"
    ),
)
@pytest.mark.parametrize("named", ["path", "url"])
def test_a_candidates_prompt_that_names_a_file_or_url_is_refused(tmp_path, named):
    """Attack: inspect's system_message reads a prompt that is a file path (or a URL) in its
    place: a system_prompt.md holding the path of a file of gold answers puts them all in the
    model's context (and a URL would fetch). Refused in one line."""
    gold = tmp_path / "gold.txt"
    gold.write_text("Say: 42")
    cheat = tmp_path / "cheat"
    cheat.mkdir()
    (cheat / "system_prompt.md").write_text(str(gold) if named == "path" else "https://example.invalid/p")
    with pytest.raises(AdapterError, match="file path or URL"):
        bridge().system_prompt(cheat)


@pytest.mark.attack(
    "candidate-code",
    attack=(
        "an inspect_ai candidate's `solver.yaml` naming a lenient scorer, easier samples and its own "
        "seed, honoured by the factory"
    ),
    outcome=(
        "prevented: the seed's scorer and samples score, and the trial seed wins over the candidate's config"
    ),
)
def test_a_solver_yaml_naming_a_scorer_a_dataset_and_a_seed_changes_none_of_them(tmp_path):
    """Attack: a candidate's solver.yaml that a factory honours in full (scorer, dataset,
    generate config): the seed's scorer and samples are used, and the trial seed wins over the
    seed the candidate's config names (common random numbers hold)."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig
    from inspect_ai.scorer import includes

    def factory(capability: Path):
        params = bridge().solver_params(capability)
        made = inspect_example().arithmetic(capability)
        easy = [Sample(id=s.id, input="What is 1 + 1?", target="2") for s in inspect_example().DATASET]
        return InspectTask(
            dataset=easy if params.get("dataset") == "easy" else made.dataset,
            solver=made.solver,
            scorer=includes() if params.get("scorer") == "includes" else made.scorer,
            config=GenerateConfig(temperature=1.0, seed=params.get("seed")),
        )

    seed_dir, cheat = tmp_path / "capability", tmp_path / "cheat"
    for folder in (seed_dir, cheat):
        folder.mkdir()
        (folder / "system_prompt.md").write_text("Answer.")
    (cheat / "solver.yaml").write_text("scorer: includes\ndataset: easy\nseed: 999\n")
    adapter = inspect_example().ArithmeticAdapter(tmp_path, factory=factory)
    tasks = adapter.tasks("all")

    def answers(folder):
        return [asyncio.run(adapter.run_target(t, folder, seed=3)).output for t in tasks]

    cheated, plain = answers(cheat), answers(seed_dir)
    assert cheated == plain  # the trial seed, not 999; the seed's questions, not the easy one
    assert all(
        asyncio.run(adapter.score(t, Rollout(task_id=t.id, output=o))).reward == 0.0
        for t, o in zip(tasks, cheated, strict=True)
    )  # exact(), not includes()


@pytest.mark.attack(
    "candidate-code",
    attack=(
        'inspect_ai candidate code that reads the gold from `state.metadata` (`{"answer": gold}`, a '
        "reference solution)"
    ),
    outcome=(
        "prevented: the candidate's eval gets no entry whose value is the target, nor the keys of "
        "`hidden_metadata`; the scorers get all"
    ),
)
def test_a_candidates_solver_that_reads_gold_from_metadata_sees_none(tmp_path):
    """Attack: candidate code in the eval reads ``state.metadata`` where the dataset keeps the
    gold ({"answer": gold}, {"solution": "... 42"}). An entry whose value is the target, and
    the keys the adapter names in ``hidden_metadata``, are not in the candidate's eval; the
    scorer still gets the full metadata."""
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import solver

    dataset = MemoryDataset(
        [
            Sample(
                id=t, input=q, target=g, metadata={"answer": g, "solution": f"so it is {g}", "kind": "sum"}
            )
            for t, q, g in inspect_example().QUESTIONS
        ]
    )
    seen = []

    @solver
    def peek():
        async def solve(state, generate):
            seen.append(dict(state.metadata))
            said = state.metadata.get("answer") or state.metadata.get("solution", "").split()[-1:] or [""]
            state.output = ModelOutput.from_content(
                "mockllm/model", said if isinstance(said, str) else said[0]
            )
            return state

        return solve

    class Hiding(_echo()):
        hidden_metadata = ("solution",)

    def factory(capability: Path):
        return InspectTask(dataset=dataset, solver=[peek()], scorer=inspect_example().exact())

    adapter = Hiding(_project(tmp_path), factory=factory)
    task = adapter.tasks("all")[0]
    rollout = asyncio.run(adapter.run_target(task, tmp_path / "capability", seed=0))
    assert seen == [{"kind": "sum"}] and rollout.output == ""
    assert asyncio.run(adapter.score(task, rollout)).reward == 0.0
    assert task.metadata == {"answer": "42", "solution": "so it is 42", "kind": "sum"}
