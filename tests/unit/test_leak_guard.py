"""The leak guard's matcher (:mod:`pytest_capevolve._project.leak`): what counts as a val or
test task's id or gold answer in a candidate's added lines, and what never does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._project.adapter import Task
from pytest_capevolve._project.candidate import content_hash
from pytest_capevolve._project.leak import (
    Matcher,
    find_leaks,
    gold_values,
    needles,
    normalize,
    parent_lines,
    read_candidate,
    screen_key,
)
from pytest_capevolve._project.spec import SpecError, load_spec

POOL = [
    Task(id="q-0001", input="2+2", target=4),
    Task(id="q-0002", input="capital", target="Reykjavik"),
    Task(id="q-0003", input="yes?", target="yes"),
    Task(id="q-0004", input="label", target="resolved"),
    Task(id="q-0005", input="label", target="resolved"),
    Task(id="q-0006", input="label", target="resolved"),
    Task(id="q-0007", input="many", target={"answer": ["New  York", 31415], "note": None}),
    Task(id="q-0008", input="train only", target="Ouagadougou"),
]
GUARDED = {"q-0001": "val", "q-0002": "val", "q-0003": "test", "q-0004": "val", "q-0007": "test"}


def _scan(tmp_path: Path, text: str, parent: str = "") -> list[str]:
    (tmp_path / "parent").mkdir(exist_ok=True)
    (tmp_path / "parent" / "prompt.md").write_text(parent)
    (tmp_path / "cand").mkdir(exist_ok=True)
    (tmp_path / "cand" / "prompt.md").write_text(text)
    matcher = Matcher(needles(POOL, GUARDED, 4))
    return [
        leak.describe()
        for leak in find_leaks(
            read_candidate(tmp_path / "cand")[1], parent_lines(tmp_path / "parent"), matcher
        )
    ]


def test_needles_skip_short_values_labels_and_unguarded_tasks() -> None:
    found = {(n.text, n.kind) for n in needles(POOL, GUARDED, 4)}
    assert ("reykjavik", "gold") in found and ("q-0002", "id") in found
    assert ("new york", "gold") in found and ("31415", "gold") in found
    assert not {t for t, _ in found} & {"4", "yes", "resolved", "ouagadougou", "q-0008"}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("If asked about the capital, say Reykjavik.", "prompt.md:1 holds a val or test task's gold answer"),
        ("Task Q-0002 wants the capital.", "prompt.md:1 holds the id of val task 'q-0002'"),
        ("The answer is new\tyork, always.", "prompt.md:1 holds a val or test task's gold answer"),
        ("pi-ish: 31415!", "prompt.md:1 holds a val or test task's gold answer"),
    ],
)
def test_an_added_line_holding_an_id_or_a_gold_answer_is_named_by_file_and_line(tmp_path, line, expected):
    assert _scan(tmp_path, line) == [expected]


@pytest.mark.parametrize(
    "line",
    [
        "Answer 4 when the sum is 4; say yes when asked.",  # too short to count
        "Mark the ticket resolved.",  # a label: the target of three tasks
        "Reykjavikian customs are a thing.",  # not a whole token
        "Ticket q-00021 is not q-0002's neighbour",  # q-00021 ≠ q-0002; but q-0002 itself is
        "Ouagadougou is a train task's answer.",  # train tasks are the optimizer's to study
    ],
)
def test_short_common_partial_or_train_values_do_not_flag(tmp_path, line):
    found = _scan(tmp_path, line)
    assert found == ([] if "q-0002's" not in line else ["prompt.md:1 holds the id of val task 'q-0002'"])


def test_only_lines_added_to_the_parent_are_read(tmp_path):
    """The seed (what the user wrote) and lines inherited from the best are not the edit."""
    inherited = "Example: the capital is Reykjavik.\n"
    assert _scan(tmp_path, inherited + "Be brief.\n", parent=inherited) == []
    found = _scan(tmp_path, inherited + "Be brief.\nq-0001 is 4\n", parent=inherited)
    assert found == ["prompt.md:3 holds the id of val task 'q-0001'"]


def test_a_gold_answer_is_never_echoed_in_the_refusal(tmp_path):
    found = _scan(tmp_path, "Reykjavik")
    assert found and all("reykjavik" not in f.lower() and "q-0002" not in f for f in found)


def test_gold_values_walk_containers_and_take_a_multiline_answer_by_its_longest_line():
    assert list(gold_values({"a": [1, "x"], "b": (2.5,), "c": True})) == ["1", "x", "2.5"]
    assert list(gold_values("short\na much longer final line\n")) == ["a much longer final line"]


TOKENS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=4, max_size=12)


@given(
    ids=st.lists(TOKENS, min_size=1, max_size=6, unique=True),
    golds=st.lists(st.text(min_size=1, max_size=20), max_size=6),
    text=st.text(max_size=300),
)
def test_a_file_without_any_id_or_answer_never_flags(ids, golds, text) -> None:
    """Whatever the needles, a text none of them occurs in (case and whitespace aside) is clean."""
    pool = [Task(id=i, target=golds[n] if n < len(golds) else None) for n, i in enumerate(ids)]
    found = needles(pool, dict.fromkeys(ids, "val"), 4)
    normalized = normalize(text)
    if any(n.text in normalized for n in found):
        return  # holds a needle somewhere: not this property's case
    matcher = Matcher(found)
    assert all(matcher.in_line(line) is None for line in text.splitlines())


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_normalizes_as_the_full_unicode_path_does(text) -> None:
    """ASCII takes a short path (casefold, spaces); a zero-width space added sends the same text
    through the full one (NFKD, drop format characters and marks, NFKC), which must agree."""
    assert normalize(text) == normalize(text + "\u200b")


@pytest.mark.parametrize("value", [0, -2, True, "four", 2.5])
def test_a_bad_leak_guard_key_is_refused_naming_the_key(tmp_path, value) -> None:
    (tmp_path / "capability").mkdir()
    (tmp_path / "adapter.py").write_text("")
    (tmp_path / "capevolve.yaml").write_text(
        f"adapter: adapter.py:A\ncapability_path: capability\nleak_guard_min_length: {value!r}\n"
    )
    with pytest.raises(SpecError, match="key 'leak_guard_min_length' must be a whole number ≥ 1 .*or false"):
        load_spec(tmp_path)


def test_the_leak_guard_key_tunes_or_turns_it_off(tmp_path) -> None:
    (tmp_path / "capability").mkdir()
    (tmp_path / "adapter.py").write_text("")
    spec = tmp_path / "capevolve.yaml"
    spec.write_text("adapter: adapter.py:A\ncapability_path: capability\n")
    assert load_spec(tmp_path).leak_guard_min_length == 4
    spec.write_text(spec.read_text() + "leak_guard_min_length: false\n")
    assert load_spec(tmp_path).leak_guard_min_length is None


def test_short_ids_count_when_distinctive_and_gold_keeps_its_minimum() -> None:
    pool = [
        Task(id="n03", input="a", target="ok"),  # letters and digits: an id at any length
        Task(id="cat", input="b", target="dog"),  # a common word: not at 3 characters
        Task(id="42", input="c", target=7),  # a number: not at 2 digits
        Task(id="a-1", input="d", target="Oslo"),  # punctuation: an id
        Task(id="x", input="e", target="no"),  # one character never
    ]
    guarded = {t.id: "val" for t in pool}
    found = {(n.text, n.kind) for n in needles(pool, guarded, 4)}
    assert {t for t, k in found if k == "id"} == {"n03", "a-1"}
    assert {t for t, k in found if k == "gold"} == {"oslo"}  # "ok", "dog", "7", "no": too short


@pytest.mark.parametrize(
    "line",
    [
        "ticket Ｑ－０００２ first",  # fullwidth (NFKC)
        "ticket q\u200b-00\u200c02 first",  # zero-width characters inside
        'ID = "q-00" + "02"',  # adjacent literals joined
        "ID = 'q-0' '002'",
        "hint: cS0wMDAy",  # base64 of "q-0002"
        "hint: dGlja2V0IHEtMDAwMg==",  # base64 of "ticket q-0002"
    ],
)
def test_simple_re_encodings_of_an_id_are_seen(tmp_path, line) -> None:
    assert _scan(tmp_path, line) == ["prompt.md:1 holds the id of val task 'q-0002'"]


def test_prose_with_quotes_and_words_that_look_like_base64_does_not_flag(tmp_path) -> None:
    assert _scan(tmp_path, "Say 'hello' and 'goodbye'; check Base64 and ABCD tokens.") == []


@pytest.mark.attack(
    "harness",
    attack=(
        "the leak guard's refusal, printed where the optimizer reads, naming the test task it caught "
        "(one probe per id)"
    ),
    outcome="prevented: a test task's id is never named",
)
def test_a_test_tasks_id_is_refused_without_being_named(tmp_path: Path) -> None:
    """The gate's output is read by the optimizer: naming the test id it refused confirmed, one
    probe at a time, which tasks the sealed split holds (the loop's red team)."""
    assert _scan(tmp_path, "Remember Q-0003.") == ["prompt.md:1 holds the id of a test task"]
    assert _scan(tmp_path, "Remember q-0001.") == ["prompt.md:1 holds the id of val task 'q-0001'"]


@pytest.mark.attack(
    "runs-recorded",
    attack=(
        "a leak hidden from the guard: a NUL byte appended to the file (it was skipped as binary), "
        "UTF-16 text, or the id in a file's name (`q01-answer.md`)"
    ),
    outcome=(
        "refused: a file holding NULs is searched with each NUL a line break and with the NULs "
        "dropped, and every file's path is searched like a line"
    ),
)
@pytest.mark.parametrize(
    "data",
    [
        b"Task q-0002 wants the capital.\n\0",  # a NUL appended: the file read as binary before
        "Task q-0002 wants the capital.".encode("utf-16"),  # UTF-16: NULs between the characters
        b"\x89PNG\0\0\0say Reykjavik\0\xff\xfe",  # text inside a file no editor opens
    ],
    ids=["nul-appended", "utf16", "binary-with-text"],
)
def test_a_file_holding_nul_bytes_is_still_searched(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "parent").mkdir()
    (tmp_path / "cand").mkdir()
    (tmp_path / "cand" / "blob.bin").write_bytes(data)
    matcher = Matcher(needles(POOL, GUARDED, 4))
    found = find_leaks(read_candidate(tmp_path / "cand")[1], parent_lines(tmp_path / "parent"), matcher)
    assert [leak.path for leak in found][:1] == ["blob.bin"]


@pytest.mark.attack(
    "runs-recorded",
    attack=(
        "a leak hidden from the guard: a NUL byte appended to the file (it was skipped as binary), "
        "UTF-16 text, or the id in a file's name (`q01-answer.md`)"
    ),
)
def test_a_file_name_holding_an_id_is_a_leak_and_an_inherited_name_is_not(tmp_path: Path) -> None:
    (tmp_path / "parent" / "notes").mkdir(parents=True)
    (tmp_path / "parent" / "notes" / "q-0001.md").write_text("kept from the seed\n")
    (tmp_path / "cand" / "notes").mkdir(parents=True)
    (tmp_path / "cand" / "notes" / "q-0001.md").write_text("kept from the seed\n")
    (tmp_path / "cand" / "notes" / "Q-0002-answer.md").write_text("nothing to see\n")
    matcher = Matcher(needles(POOL, GUARDED, 4))
    found = find_leaks(read_candidate(tmp_path / "cand")[1], parent_lines(tmp_path / "parent"), matcher)
    assert [leak.describe() for leak in found] == [
        "the name of notes/Q-0002-answer.md holds the id of val task 'q-0002'"
    ]


def test_a_screen_key_changes_with_each_fact_a_finding_rests_on() -> None:
    facts = ("sha256:cand", "sha256:best", "pool", {"v1": "val", "t1": "test"}, 4)
    key = screen_key(*facts)
    assert screen_key(*facts) == key
    changed = [
        ("sha256:cand2", *facts[1:]),  # the candidate's bytes
        (facts[0], "sha256:best2", *facts[2:]),  # its parent's (the lines it inherits)
        (*facts[:2], "pool2", *facts[3:]),  # the task pool (ids and gold answers)
        (*facts[:3], {"v1": "val", "t1": "val"}, 4),  # the guarded ids
        (*facts[:3], {"v1": "val"}, 4),
        (*facts[:4], 3),  # the minimum length
    ]
    assert len({screen_key(*other) for other in changed} | {key}) == len(changed) + 1


def test_read_candidate_hashes_the_bytes_it_hands_the_screen(tmp_path: Path) -> None:
    """One read: the hash is :func:`content_hash`'s of the same tree, and the files are its bytes."""
    cand = tmp_path / "cand"
    (cand / "tools").mkdir(parents=True)
    (cand / "prompt.md").write_text("Answer briefly.\n")
    (cand / "tools" / "q-0002.py").write_bytes(b"x = 1\0\n")
    (cand / "JOURNAL.md").write_text("handover: never part of a candidate\n")
    digest, files = read_candidate(cand)
    assert digest == content_hash(cand)
    assert files == {"prompt.md": b"Answer briefly.\n", "tools/q-0002.py": b"x = 1\0\n"}
    (cand / "prompt.md").write_text("Say Reykjavik.\n")  # written after the read: not what is screened
    matcher = Matcher(needles(POOL, GUARDED, 4))
    assert [f.describe() for f in find_leaks(files, set(), matcher)] == [
        "the name of tools/q-0002.py holds the id of val task 'q-0002'"
    ]
