"""An inspect_ai ``Task`` as a capevolve adapter (``pip install 'pytest-capevolve[inspect]'``).

Each sample is a task, each (sample, trial) a rollout. The dataset and scorers are always the seed's; a
candidate supplies only its solver and generate config, and its eval never sees the gold. How each piece
maps (rewards, judges, batches, logs): ``docs/how-to/inspect-ai.md``."""

from __future__ import annotations

import asyncio
import contextvars
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

import yaml

from .._project.adapter import AdapterError, Rollout, Score, Task

try:
    import inspect_ai
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        GenerateConfig,
        Model,
        ModelName,
        ModelOutput,
        get_model,
    )
    from inspect_ai.model._model import init_active_model, init_model_roles
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState
    from inspect_ai.util._display import init_display_type

    # shared with ``capevolve compare``'s inspect reader, so both score a sample alike
    from .._imported.inspect_log import inspect_reward
except ImportError as exc:  # imported by a project's adapter.py, when a session collects
    raise ImportError("the inspect bridge needs inspect_ai: pip install 'pytest-capevolve[inspect]'") from exc

_MESSAGES: dict[str, type[ChatMessage]] = {
    "system": ChatMessageSystem,
    "user": ChatMessageUser,
    "assistant": ChatMessageAssistant,
    "tool": ChatMessageTool,
}
Factory = Callable[[Path], "inspect_ai.Task"]


def system_prompt(capability: Path, name: str = "system_prompt.md", *, template: bool = False) -> str:
    """The text of ``name`` in the candidate's folder, made inert for ``system_message``: a file path or URL
    (which it would read in place of the prompt) is refused, and braces are doubled so ``{answer}`` is not
    filled from the sample's metadata (``template=True`` keeps them)."""
    path = Path(capability) / name
    if not path.is_file():
        raise AdapterError(f"candidate {capability} has no {name}: the system prompt it optimizes")
    text = path.read_text(encoding="utf-8")
    if _names_a_resource(text):
        raise AdapterError(
            f"{path} is a file path or URL, which inspect's system_message would read in place of "
            "the prompt: a system prompt is text"
        )
    return text if template else text.replace("{", "{{").replace("}", "}}")


def _names_a_resource(text: str) -> bool:
    """Whether inspect's ``resource()`` would read ``text`` as a file or URL."""
    if "://" in text and urlparse(text).scheme:
        return True
    try:
        return os.path.exists(text)
    except (OSError, ValueError):
        return False


def solver_params(capability: Path, name: str = "solver.yaml") -> dict[str, Any]:
    """The candidate's solver parameters: the mapping in ``name`` (``{}`` without the file)."""
    path = Path(capability) / name
    params = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    if params is None:  # no file, or an empty one
        return {}
    if not isinstance(params, dict):
        raise AdapterError(f"{path} must hold a mapping of solver parameters, got {type(params).__name__}")
    return params


class InspectTaskAdapter:
    """Subclass it and set ``factory`` (and ``model``, ``model_args``), or pass them to ``__init__``."""

    factory: ClassVar[Factory | None] = None
    model: ClassVar[str] = "mockllm/model"
    model_args: ClassVar[dict[str, Any]] = {}
    # the seed capability, relative to the project, when capevolve.yaml does not name one
    capability_path: ClassVar[str] = "capability"
    log_dir: ClassVar[str | None] = None  # where inspect's logs stay (None: a temporary folder)
    # the judge of a model-graded scorer (None: ``model``), seeded by :meth:`score`
    grader: ClassVar[str | None] = None
    grader_args: ClassVar[dict[str, Any]] = {}
    grader_config: ClassVar[dict[str, Any]] = {}
    # sample metadata keys that hold gold, hidden from the candidate's eval
    hidden_metadata: ClassVar[tuple[str, ...]] = ()
    # True for a model-graded scorer: ``judge_rescores: r`` then scores each output r times
    stochastic_score: ClassVar[bool] = False
    thread_safe = True  # a candidate is its folder, handed to the factory: nothing process-wide
    _batches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batches]
    # one grader client per event loop (a client is bound to the loop it was made in)
    _graders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Model]

    def __init__(self, project_dir: Path | None = None, *, factory: Factory | None = None) -> None:
        made = factory or type(self).factory
        if made is None:
            raise AdapterError(f"{type(self).__name__} needs a task factory: set factory = staticmethod(fn)")
        self._factory: Factory = made
        project = Path(project_dir or ".")
        spec = project / "capevolve.yaml"
        loaded = yaml.safe_load(spec.read_text(encoding="utf-8")) if spec.is_file() else None
        named = loaded.get("capability_path") if isinstance(loaded, dict) else None
        self._seed_dir = project / str(named or self.capability_path)
        reference = self._factory(self._seed_dir)
        self._scorers = _as_list(reference.scorer)
        if not self._scorers:
            raise AdapterError(f"the seed's inspect task ({self._seed_dir}) has no scorer: nothing to gate")
        self._samples = _keyed_samples(reference.dataset)
        self._batches = weakref.WeakKeyDictionary()
        self._graders = weakref.WeakKeyDictionary()
        self._logs = Path(self.log_dir or tempfile.mkdtemp(prefix="capevolve-inspect-"))
        if not self.log_dir:
            weakref.finalize(self, shutil.rmtree, self._logs, True)
        self.evals = 0  # inspect evals run by this adapter (batches), for tests and benchmarks

    def tasks(self, split: str) -> list[Task]:
        return [
            Task(
                id=key,
                input=_text(sample.input),
                target=list(sample.target) if isinstance(sample.target, (list, tuple)) else sample.target,
                metadata=dict(sample.metadata or {}),
            )
            for key, sample in self._samples.items()
        ]

    async def run_target(self, task: Task, ctx: Path, *, seed: int) -> Rollout:
        loop = asyncio.get_running_loop()
        batches = self._batches.get(loop)
        if batches is None:
            batches = self._batches[loop] = _Batches(self._run_batch)
        try:
            return await batches.submit((str(Path(ctx)), seed), task.id)
        except AdapterError:
            raise
        except Exception as exc:  # the eval itself failed: every rollout of it is missing data
            return Rollout(task_id=task.id, error=f"inspect eval failed: {type(exc).__name__}: {exc}")

    async def _run_batch(self, key: tuple[str, int], task_ids: list[str]) -> dict[str, Rollout]:
        """One ``eval_async`` of the candidate's solver over ``task_ids`` at one seed."""
        ctx, seed = key
        candidate = self._factory(Path(ctx))
        samples = [self._blind(self._samples[t]) for t in task_ids]
        solver, config = candidate.solver, candidate.config
        run = inspect_ai.Task(dataset=samples, solver=solver, scorer=None, config=config, name="capevolve")
        init_display_type("none")  # the terminal belongs to pytest: no inspect progress display
        self.evals += 1
        logs = await inspect_ai.eval_async(
            run,
            model=self.model,
            model_args=dict(self.model_args),
            seed=seed,
            score=False,
            log_dir=str(self._logs),
            fail_on_error=False,
        )
        [log] = logs
        by_id = {str(s.id): s for s in (log.samples or [])}
        failed = log.error.message if log.error is not None else f"inspect eval ended {log.status}"
        return {t: _rollout_of(t, by_id.get(t), failed) for t in task_ids}

    def _blind(self, sample: Any) -> Any:
        """The sample without its target and gold metadata (in :attr:`hidden_metadata`, or equal to the
        target); the scorers still see all of it."""
        golds = {str(t) for t in _as_list(sample.target)}
        metadata = {
            key: value
            for key, value in (sample.metadata or {}).items()
            if key not in self.hidden_metadata and str(value) not in golds
        }
        return sample.model_copy(update={"target": "", "metadata": metadata})

    async def score(self, task: Task, rollout: Rollout, *, seed: int | None = None) -> Score:
        """The seed's scorers on the persisted rollout, with :attr:`grader` as inspect's active
        model and ``grader`` role under the judge ``seed`` (``stochastic_score`` adapters only)."""
        state = _state_of(task, rollout, self.model)
        target = Target(task.target)
        grader = _CountedGrader.of(self._grader())
        values: dict[str, Any] = {}
        first: Any = None
        for scorer in self._scorers:
            result = await _with_grader(scorer(state, target), grader, seed)
            if result is None:
                continue
            name = getattr(scorer, "__name__", None) or f"scorer{len(values)}"
            values[name] = result.value
            if first is None:
                first = result
        if self.stochastic_score and seed is not None and grader.calls == 0:
            # the judge seed reached no model: the judge's share of the variance would read 0 %
            raise AdapterError(
                f"score({task.id!r}): stochastic_score = True, but no scorer generated with the "
                f"grader the bridge seeds ({self.grader or self.model}); name the judge on the "
                "adapter (grader = '...'), not in the scorer (model_graded_qa() without model=)"
            )
        if first is None:
            raise AdapterError(f"score({task.id!r}): the inspect scorers returned no score")
        return Score(
            reward=self.reward_of(first.value),
            feedback=str(first.explanation or ""),
            metrics={"inspect_values": values, "answer": first.answer},
        )

    def _grader(self) -> Model:
        loop = asyncio.get_running_loop()
        grader = self._graders.get(loop)
        if grader is None:
            name, args = (self.grader, self.grader_args) if self.grader else (self.model, self.model_args)
            grader = self._graders[loop] = get_model(
                name, config=GenerateConfig(**self.grader_config), memoize=False, **dict(args)
            )
        return grader

    def reward_of(self, value: Any) -> float:
        """The reward of an inspect score value (:func:`.._imported.inspect_log.inspect_reward`)."""
        reward = inspect_reward(value)
        if reward is not None:
            return reward
        raise AdapterError(
            f"inspect score value {value!r} has no reward: C/P/I/N, a bool or a number in [0, 1] "
            "map; override reward_of to map another"
        )


class _Batches:
    """Rollouts waiting for an eval, grouped by (candidate folder, seed), on one event loop. The lock also
    keeps concurrent rollouts legal: inspect allows one ``eval_async`` at a time."""

    def __init__(self, run: Callable[[tuple[str, int], list[str]], Any]) -> None:
        self._run = run
        self._pending: dict[tuple[str, int], list[tuple[str, asyncio.Future[Rollout]]]] = {}
        self._lock = asyncio.Lock()

    async def submit(self, key: tuple[str, int], task_id: str) -> Rollout:
        future: asyncio.Future[Rollout] = asyncio.get_running_loop().create_future()
        waiting = self._pending.setdefault(key, [])
        waiting.append((task_id, future))
        if len(waiting) == 1:
            asyncio.get_running_loop().create_task(self._flush(key))
        return await future

    async def _flush(self, key: tuple[str, int]) -> None:
        async with self._lock:
            await asyncio.sleep(0)  # rollouts started in the same turn of the loop join this batch
            batch = [(t, f) for t, f in self._pending.pop(key, []) if not f.done()]
            if not batch:
                return
            try:
                results = await self._run(key, sorted({t for t, _ in batch}))
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
            for task_id, future in batch:
                if not future.done():  # a rollout cut at its deadline was cancelled
                    future.set_result(results[task_id])


class _CountedGrader(Model):
    """The grader for one score() call, counting its generate calls."""

    calls = 0

    @classmethod
    def of(cls, model: Model) -> _CountedGrader:
        counted = cls(model.api, model.config, model.model_args)
        counted._explicit_base_url = model.explicit_base_url
        return counted

    async def generate(self, *args: Any, **kwargs: Any) -> ModelOutput:
        self.calls += 1
        return await super().generate(*args, **kwargs)


async def _with_grader(scoring: Any, grader: Model, seed: int | None) -> Any:
    """Await ``scoring`` with ``grader`` as the active and ``grader``-role model under ``seed``, in a copied
    context so nothing leaks into a concurrent score()."""
    context = contextvars.copy_context()
    context.run(init_active_model, grader, GenerateConfig(seed=seed))
    context.run(init_model_roles, {"grader": grader})
    return await asyncio.get_running_loop().create_task(scoring, context=context)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _keyed_samples(dataset: Any) -> dict[str, Any]:
    """The dataset's samples keyed by task id: the sample's id, else its 1-based position."""
    keyed: dict[str, Any] = {}  # inspect_ai.dataset.Sample, its id set
    for position, sample in enumerate(dataset, start=1):
        if sample.id is None:
            sample = sample.model_copy(update={"id": position})
        key = str(sample.id)
        if key in keyed:
            raise AdapterError(f"the inspect dataset has two samples with id {key!r}; ids must be unique")
        keyed[key] = sample
    return keyed


def _text(value: Any) -> Any:
    """A sample's input as plain JSON: its text, or its messages as role/text pairs."""
    return value if isinstance(value, str) else [{"role": m.role, "content": m.text} for m in value]


def _rollout_of(task_id: str, sample: Any, failed: str) -> Rollout:
    """One evaluated sample's messages and completion as plain text (no ids or timings, which differ
    between two runs of the same thing)."""
    if sample is None:
        return Rollout(task_id=task_id, error=f"inspect returned no sample: {failed}")
    if sample.error is not None:
        return Rollout(task_id=task_id, error=f"inspect sample error: {sample.error.message}")
    usage = list((sample.model_usage or {}).values())
    cost = sum(u.total_cost or 0.0 for u in usage)
    return Rollout(
        task_id=task_id,
        output=sample.output.completion,
        trace={
            "messages": [{"role": m.role, "content": m.text} for m in sample.messages],
            "stop_reason": sample.output.stop_reason,
        },
        tokens=sum(u.total_tokens for u in usage),
        cost_usd=cost,
    )


def _state_of(task: Task, rollout: Rollout, model: str) -> Any:
    """The ``TaskState`` a scorer reads, rebuilt from the persisted rollout alone."""
    trace = rollout.trace if isinstance(rollout.trace, dict) else {}
    messages = _messages(trace.get("messages", []))
    output = ModelOutput.from_content(model=model, content=str(rollout.output or ""))
    return TaskState(
        model=ModelName(model),
        sample_id=task.id,
        epoch=1,
        input=task.input if isinstance(task.input, str) else _messages(task.input or []),
        messages=messages,
        target=Target(task.target),
        output=output,
        completed=True,
        metadata=dict(task.metadata or {}),
    )


def _messages(pairs: list[dict[str, Any]]) -> list[Any]:
    return [
        _MESSAGES.get(m.get("role", ""), ChatMessageUser)(content=str(m.get("content", ""))) for m in pairs
    ]
