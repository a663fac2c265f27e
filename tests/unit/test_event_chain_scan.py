"""verify's one-pass check of the event log's chain (store/event_chain.py ``_intact_chain``) gives
the verdict the line-by-line walk gives, on intact logs and on logs edited in every way the
walk names — so the fast path can only ever save time, never pass a log the walk refuses."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_capevolve._store.files import RunLock
from pytest_capevolve._store.log.event_chain import _intact_chain, verify_events, walk_chain
from pytest_capevolve._store.log.events import EventLog

EDITS = ("drop", "swap", "duplicate", "char", "space", "crlf", "blank", "split", "join", "bom", "none")


def intact_log(tmp: Path, count: int) -> bytes:
    path = tmp / "events.jsonl"
    path.unlink(missing_ok=True)
    log = EventLog(path, RunLock(tmp / ".lock"))
    for n in range(count):
        if n % 3 == 0:
            log.append_event("mechanism", text=f"ünïcode {n}", tasks={"a": [n, None]})
        else:
            log.append_event("rollout", split="val", task_id=f"t{n}", tag="seed", trial=n, reward=n / 10)
    log.close_log()
    return path.read_bytes()


def edited(raw: bytes, edit: str, at: int) -> bytes:
    lines = raw.split(b"\n")[:-1]
    i = at % len(lines)
    if edit == "drop":
        del lines[i]
    elif edit == "swap" and len(lines) > 1:
        j = (i + 1) % len(lines)
        lines[i], lines[j] = lines[j], lines[i]
    elif edit == "duplicate":
        lines.insert(i, lines[i])
    elif edit == "char":
        lines[i] = lines[i].replace(b'"seed"', b'"seeD"').replace(b"0.", b"9.", 1)
    elif edit == "space":  # still the same value to json.loads, but not to the hash
        lines[i] = b" " + lines[i] + b" "
    elif edit == "crlf":
        return b"\r\n".join(lines) + b"\r\n"
    elif edit == "blank":
        lines.insert(i, b"")
    elif edit == "split":  # one value over two lines
        lines[i] = lines[i].replace(b", ", b",\n", 1)
    elif edit == "join" and len(lines) > 1:  # two values on one line
        lines[i : i + 2] = [lines[i] + b"," + lines[(i + 1) % len(lines)]]
    elif edit == "bom":
        lines[0] = b"\xef\xbb\xbf" + lines[0]
    return b"\n".join(lines) + b"\n"


def test_an_intact_log_is_read_in_one_pass_to_the_same_events(tmp_path: Path) -> None:
    raw = intact_log(tmp_path, 7)
    count, problem, walked = walk_chain(raw)
    assert (count, problem) == (7, None)
    assert _intact_chain(raw) == walked  # the one pass took it, and read the same events
    assert _intact_chain(raw + b"\n") is None  # a blank last line: left to the walk
    assert verify_events(tmp_path / "events.jsonl") == (7, None)


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(1, 6),
    edits=st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 20)), max_size=3),
    tail=st.booleans(),
)
def test_any_edit_gets_the_walks_verdict(tmp_path_factory, count, edits, tail) -> None:
    tmp = tmp_path_factory.mktemp("log")
    raw = intact_log(tmp, count)
    for edit, at in edits:
        raw = edited(raw, edit, at)
    if tail:
        raw = raw.rstrip(b"\n")  # no newline after the last line
    path = tmp / "events.jsonl"
    path.write_bytes(raw)
    try:
        expected = walk_chain(raw)[:2]
    except UnicodeDecodeError:
        return
    assert verify_events(path) == expected
    fast = _intact_chain(raw)
    if fast is not None:  # the one pass never takes a log the walk refuses
        assert expected == (len(fast), None)
