"""The sandbox's answers are read as values: a pickle that would run code is refused."""

from __future__ import annotations

import os
import pickle
import sys
import time
import types
from dataclasses import dataclass

import pytest

from pytest_capevolve import Rollout, Task
from pytest_capevolve._engine.sandbox import Sandboxes
from pytest_capevolve._engine.sandbox_child import Child
from pytest_capevolve._engine.sandbox_process import Sandbox, decode_answer
from pytest_capevolve._engine.wire import (
    HEADER,
    SAME_TASK,
    FrameReader,
    ValueLoader,
    WireError,
    frame,
    write_frame,
)


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class _PatchesTheScorer:
    def __reduce__(self):
        return (setattr, (Rollout, "reward", 1.0))


@dataclass
class Reply:  # stands for a class of the harness's adapter module
    text: str
    words: tuple


@pytest.mark.attack(
    "candidate-code",
    attack="a forged answer frame from the child (a pickle that calls or imports, a frame too long)",
    outcome="refused: the answer is refused and the child killed",
)
@pytest.mark.parametrize("hostile", [_RunsCode(), _PatchesTheScorer(), Reply])
def test_an_answer_that_would_call_or_import_anything_is_refused(hostile) -> None:
    blob = pickle.dumps(Rollout(task_id="t", output=hostile))
    with pytest.raises(WireError):
        ValueLoader(()).load(blob)


def test_values_and_the_harness_modules_classes_come_back_as_they_were() -> None:
    rollout = Rollout(task_id="t", output=Reply("a", ("a", 1)), trace={"s": {1, 2}, "t": (3,)})
    back = ValueLoader([__name__]).load(pickle.dumps(rollout))
    assert back == rollout and isinstance(back.output.words, tuple)
    with pytest.raises(WireError):  # the same class from a module not named as the harness's
        ValueLoader(()).load(pickle.dumps(rollout))


def test_frames_survive_a_pipe_in_pieces_and_end_of_file_is_none() -> None:
    read_fd, write_fd = os.pipe()
    data = frame({"id": 1}) + frame({"id": 2})
    for piece in (data[:3], data[3:11], data[11:]):
        os.write(write_fd, piece)
    os.close(write_fd)
    reader = FrameReader(read_fd)
    assert [pickle.loads(reader.read()), pickle.loads(reader.read())] == [{"id": 1}, {"id": 2}]
    assert reader.read() is None
    os.close(read_fd)


@pytest.mark.attack(
    "candidate-code",
    attack="a forged answer frame from the child (a pickle that calls or imports, a frame too long)",
)
def test_a_frame_longer_than_any_rollout_is_refused_not_awaited() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, (1 << 62).to_bytes(8, "big"))
    with pytest.raises(WireError):
        FrameReader(read_fd).read()
    os.close(read_fd)
    os.close(write_fd)


# -- the lean answer frame: the answer's fields, then the rollout's own pickle ----------------


def _answer(*values: object) -> bytes:
    return b"".join(pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL) for v in values)


def test_an_answer_is_its_fields_then_the_rollouts_own_pickle() -> None:
    rollout = Rollout(task_id="t", output=Reply("a", ("a", 1)))
    request_id, answer = decode_answer(
        _answer((7, None, "out", "", [], True), rollout), ValueLoader([__name__]), 0.5
    )
    assert request_id == 7 and answer.scored.rollout == rollout and answer.stdout == "out"
    assert isinstance(answer.scored.rollout.output.words, tuple) and answer.scored.seconds == 0.5


@pytest.mark.parametrize(
    "payload",
    [
        _answer((7, None, "", "", [], True)),  # announces a rollout it does not send
        _answer((7, "boom", "", "", [], False), Rollout(task_id="t")),  # sends one it did not announce
        _answer((7, None, "", "", [], True), {"task_id": "t"}),  # a rollout that is not a Rollout
        _answer((7, None, "", "", [], True), Rollout(task_id="t")) + b"\x80",  # bytes after it
        _answer((7, None, "", "", [], True), Rollout(task_id="t", output=_RunsCode())),  # code in it
        _answer({"id": 7}),  # the fields in another shape
    ],
    ids=["unsent", "unannounced", "not-a-rollout", "trailing", "code", "shape"],
)
def test_an_answer_that_is_not_exactly_its_fields_and_rollout_is_refused(payload: bytes) -> None:
    with pytest.raises(WireError):
        decode_answer(payload, ValueLoader([__name__]), 0.0)


@pytest.mark.parametrize("nonblocking", [False, True], ids=["blocking", "read first"])
def test_a_large_frame_in_pieces_is_read_whole_and_a_deadline_mid_frame_loses_nothing(
    nonblocking: bool,
) -> None:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    big = os.urandom(3 << 20)  # 3 MiB: many times what a pipe holds
    data = HEADER.pack(len(big) + 2) + big + b"ok" + frame({"id": 2})
    reader = FrameReader(read_fd, nonblocking=nonblocking)
    sent, timeouts, got = 0, 0, None
    while got is None:
        try:
            sent += os.write(write_fd, data[sent : sent + 50_000])
        except BlockingIOError:
            pass
        try:
            # nothing more is written while it waits: a frame not yet whole always runs out of time
            got = reader.read(time.monotonic() + 0.001)
        except TimeoutError:
            timeouts += 1
    assert got == big + b"ok" and timeouts > 0  # cut by deadlines many times, and whole
    os.set_blocking(write_fd, True)
    os.write(write_fd, data[sent:])
    assert pickle.loads(reader.read()) == {"id": 2}
    os.close(write_fd)
    assert reader.read() is None
    os.close(read_fd)


def test_write_frame_sends_its_parts_as_one_frame() -> None:
    read_fd, write_fd = os.pipe()
    head, blob = pickle.dumps((1, None, "", "", [], True)), pickle.dumps(Rollout(task_id="t"))
    write_frame(write_fd, head, b"", blob)
    os.close(write_fd)
    reader = FrameReader(read_fd)
    assert reader.read() == head + blob and reader.read() is None
    os.close(read_fd)


def test_write_frame_goes_on_from_where_a_partial_write_stopped(monkeypatch) -> None:
    from pytest_capevolve._engine import wire

    writev, write = os.writev, os.write
    calls = []

    def five_bytes_at_most(fd: int, data) -> int:  # a pipe interrupted mid-frame, again and again
        calls.append(1)
        whole = b"".join(bytes(b) for b in data) if isinstance(data, tuple | list) else bytes(data)
        return writev(fd, [whole[:5]]) if isinstance(data, tuple | list) else write(fd, whole[:5])

    monkeypatch.setattr(wire.os, "writev", five_bytes_at_most)
    monkeypatch.setattr(wire.os, "write", five_bytes_at_most)
    read_fd, write_fd = os.pipe()
    head, blob = b"head-of-the-answer", b"the-rollout"
    write_frame(write_fd, head, b"", blob)
    monkeypatch.undo()
    os.close(write_fd)
    reader = FrameReader(read_fd)
    assert reader.read() == head + blob and reader.read() is None and len(calls) == 8
    os.close(read_fd)


# -- what the child sends: a task's pickle once, and the rollout as values the parent rebuilds --


def test_the_child_sends_plain_rollouts_as_they_are_and_others_only_as_the_parent_rebuilds_them(
    monkeypatch,
) -> None:
    candidate = types.ModuleType("candidate_tools_reply")  # a module only a candidate's code made

    class Foreign:
        def __repr__(self) -> str:
            return "<candidate object>"

    Foreign.__module__, Foreign.__qualname__ = candidate.__name__, "Foreign"
    candidate.Foreign = Foreign  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, candidate.__name__, candidate)
    child = Child(-1, -1)
    child.values = ValueLoader([__name__])  # the harness module: Reply is the adapter's class
    plain_values = Rollout(task_id="t", output={"a": [1, (2, 3)]}, trace={"s": {1}}, tool_calls=[{"n": 1}])
    assert pickle.loads(child.as_data(plain_values)) == plain_values
    harness = Rollout(task_id="t", output=Reply("a", ("a", 1)), trace=[Reply("a", ("a",))])
    assert ValueLoader([__name__]).load(child.as_data(harness)) == harness
    foreign = ValueLoader([__name__]).load(
        child.as_data(Rollout(task_id="t", output=Foreign(), trace=(1, 2)))
    )
    # not rebuildable by the parent: the JSON form the record keeps (repr for what JSON lacks)
    assert foreign.output == "<candidate object>" and foreign.trace == [1, 2]


def test_a_tasks_pickle_goes_to_a_child_once_and_again_to_a_new_child(tmp_path) -> None:
    boxes = Sandboxes("adapter.py:Adapter", tmp_path, harness_modules=[])
    sandbox = Sandbox(boxes, tmp_path)
    task = Task(id="t1", input="x" * 10_000)

    def sent_task() -> object:
        ask = boxes._ask(task, tmp_path, seed=0, split="val", timeout_s=None, inline=True)
        return pickle.loads(sandbox._request(ask)[1])[2]

    first, again = sent_task(), sent_task()
    assert isinstance(first, bytes) and pickle.loads(first) == task and again == SAME_TASK
    sandbox.sent = {}  # what _ensure does for a new child
    assert isinstance(sent_task(), bytes)
    task.input = "changed"  # the same object: still the pickle already sent
    assert sent_task() == SAME_TASK
    task = Task(id="t1", input="another task object under the same id")
    assert pickle.loads(sent_task()) == task  # a new object is sent again
    boxes.close()


def test_a_reader_waits_with_a_deadline_on_a_descriptor_above_select_s_limit() -> None:
    """A process holding many files (an in-process pytester suite) gives a child's pipe a descriptor
    ≥ 1024, where select() raises 'filedescriptor out of range': the deadline wait must not use it."""
    import resource

    from pytest_capevolve._engine.wire import FrameReader, write_frame

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1100:
        pytest.skip(f"this machine allows {hard} open files: no descriptor above 1024 to test")
    if soft <= 1100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2048, hard) if hard > 0 else 2048, hard))
    read_end, write_end = os.pipe()
    high = os.dup2(read_end, 1100)
    try:
        reader = FrameReader(high)
        with pytest.raises(TimeoutError):
            reader.read(deadline=time.monotonic() + 0.01)  # nothing written: the deadline passes
        write_frame(write_end, b"answer")
        assert reader.read(deadline=time.monotonic() + 60) == b"answer"
    finally:
        for fd in (read_end, write_end, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
