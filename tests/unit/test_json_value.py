"""The run dir's JSON decoding (store/files.py: every rollout file verify reads, every log
line a view catches up on) calls json's C scanner directly, and must give what ``json.loads``
gives — the same value, or the same error word for word (the error is what verify prints for
an unreadable file)."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_capevolve._store.files import loads_bytes, loads_utf8

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
AROUND = st.sampled_from(["", " ", "\n", "\t\r\n", "x", " 1", "\x0b", "\ufeff", ",", "}"])


def outcome(parse, raw: bytes):
    try:
        return ("value", parse(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        return ("error", type(exc).__name__, str(exc))


@settings(max_examples=300)
@given(value=JSONISH, before=AROUND, after=AROUND, cut=st.integers(0, 3))
@example(value={"a": 1}, before="", after="x", cut=0)  # extra data after the value
@example(value={"a": 1}, before="", after="\x0b", cut=0)  # whitespace to str, not to JSON
@example(value={"a": 1}, before=" ", after="", cut=0)  # whitespace before it
def test_a_document_parses_as_json_loads_parses_it(value, before: str, after: str, cut: int) -> None:
    text = before + json.dumps(value, ensure_ascii=False) + after
    raw = text.encode("utf-8")[: len(text.encode("utf-8")) - cut]  # some cut short: damaged
    assert outcome(loads_utf8, raw) == outcome(lambda r: json.loads(r.decode("utf-8")), raw)
    assert outcome(loads_bytes, raw) == outcome(json.loads, raw)


@example(raw=b'{"a": "\xed\xa0\x80"}')  # a surrogate: json.loads's surrogatepass reads it
@example(raw=b'{"\x00": 1}')
@given(raw=st.binary(max_size=12).map(lambda tail: b'{"' + tail))
def test_bytes_opening_as_an_object_parse_as_json_loads_parses_them(raw: bytes) -> None:
    assert outcome(loads_bytes, raw) == outcome(json.loads, raw)
