"""The sandbox's answers are read as values: a pickle that would run code is refused."""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

import pytest

from pytest_capevolve import Rollout
from pytest_capevolve._engine.wire import FrameReader, WireError, frame, load_answer


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


@pytest.mark.parametrize("hostile", [_RunsCode(), _PatchesTheScorer(), Reply])
def test_an_answer_that_would_call_or_import_anything_is_refused(hostile) -> None:
    blob = pickle.dumps(Rollout(task_id="t", output=hostile))
    with pytest.raises(WireError):
        load_answer(blob, harness_modules=())


def test_values_and_the_harness_modules_classes_come_back_as_they_were() -> None:
    rollout = Rollout(task_id="t", output=Reply("a", ("a", 1)), trace={"s": {1, 2}, "t": (3,)})
    back = load_answer(pickle.dumps(rollout), harness_modules=[__name__])
    assert back == rollout and isinstance(back.output.words, tuple)
    with pytest.raises(WireError):  # the same class from a module not named as the harness's
        load_answer(pickle.dumps(rollout), harness_modules=())


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


def test_a_frame_longer_than_any_rollout_is_refused_not_awaited() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, (1 << 62).to_bytes(8, "big"))
    with pytest.raises(WireError):
        FrameReader(read_fd).read()
    os.close(read_fd)
    os.close(write_fd)
