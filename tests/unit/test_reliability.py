"""Nothing lost, nothing paid twice: a damaged or edited project or run dir, a swallowed timeout,
odd task ids. Each case names the file and what is wrong; nothing persisted is rewritten."""

from __future__ import annotations

import pytest


class Retrying:
    """An adapter that retries inside a broad except: it must still time out. It retries until
    the test lets it go (``stop``; 60 s at most) and says whether it ever gave up on its own, so
    the test needs no clock: a result while ``gave_up`` is unset came from the deadline."""

    def __init__(self, catch: type[BaseException]) -> None:
        import threading

        self.catch = catch
        self.stop = threading.Event()
        self.gave_up = threading.Event()

    def tasks(self, split):
        return []

    def run_target(self, task, ctx, *, seed):
        import time

        from pytest_capevolve import Rollout

        give_up = time.monotonic() + 60.0
        while not self.stop.is_set():
            if time.monotonic() > give_up:
                self.gave_up.set()
                break
            try:
                time.sleep(0.01)
            except self.catch:
                continue  # "retry"
        return Rollout(output="late")

    def score(self, task, rollout):
        return 1.0


@pytest.mark.attack(
    "held-before",
    attack="an adapter that swallows the timeout",
    outcome="the timeout holds",
)
@pytest.mark.parametrize("catch", [Exception, BaseException])
def test_the_rollout_timeout_holds_whatever_the_adapter_catches(tmp_path, catch) -> None:
    from pytest_capevolve import Task
    from pytest_capevolve._engine.runner import AdapterRunner, run_and_score

    adapter = Retrying(catch)
    try:
        scored = run_and_score(
            AdapterRunner(adapter), Task(id="t"), tmp_path, seed=0, split="val", timeout_s=0.2
        )
        assert not adapter.gave_up.is_set()  # the deadline ended it, not the agent's own limit
        # the candidate's failure (issue 37): a 0, labelled, never missing data paid again
        assert scored.caused is not None and scored.caused.startswith("timeout")
        assert scored.reward == 0.0 and scored.infra_error is None
        assert scored.feedback.startswith("candidate failure: timeout")
    finally:
        adapter.stop.set()


def test_escaped_ids_differing_in_case_stay_apart_on_a_case_insensitive_file_system() -> None:
    from pytest_capevolve._project.candidate import escape_id

    ids = ["Q1", "q1", "aB", "Ab", "^q1", "%5E", "X" * 300, "x" * 300]
    names = [escape_id(i) for i in ids]
    assert len({name.lower() for name in names}) == len(ids)
    assert escape_id("Q1") == "^q1" and escape_id("q01") == "q01"
