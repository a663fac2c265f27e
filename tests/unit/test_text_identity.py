"""The text hash (:mod:`pytest_capevolve._project.candidate.text_hash`): blind to line endings,
trailing whitespace, blank lines at either end and zero-width characters, and to nothing else a
reader of the text sees."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pytest_capevolve._project.candidate import normalized_text, text_hash

LINES = st.lists(
    st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=20), max_size=6
)


@given(LINES, st.sampled_from(["\n", "\r\n", "\r"]), st.sampled_from(["", " ", "\t", "  \t"]))
def test_line_endings_and_trailing_whitespace_do_not_change_the_text(lines, newline, trailing) -> None:
    plain = "\n".join(line.rstrip() for line in lines)
    dressed = newline.join(line.rstrip() + trailing for line in lines) + newline
    assert normalized_text(dressed.encode()) == normalized_text(plain.encode())


@given(LINES, st.sampled_from(["\n", " \n\t\n", "\ufeff", "\ufeff\n"]), st.data())
def test_blank_lines_at_the_start_and_zero_width_characters_do_not_change_the_text(lines, lead, data) -> None:
    plain = "\n".join(line.rstrip() for line in lines)
    at = data.draw(st.integers(min_value=0, max_value=len(plain)))
    mark = data.draw(st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]))
    dressed = lead + plain[:at] + mark + plain[at:]
    assert normalized_text(dressed.encode()) == normalized_text(plain.encode())


@given(LINES, st.integers(min_value=0, max_value=5), st.characters(whitelist_categories=("L", "N", "P")))
def test_a_visible_character_changed_changes_the_text(lines, at, extra) -> None:
    plain = "\n".join(line.rstrip() for line in lines) or "x"
    changed = plain[:at] + extra + plain[at:]
    assert normalized_text(changed.encode()) != normalized_text(plain.encode())


def test_the_tree_hash_counts_paths_binary_bytes_and_empty_files(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        root.mkdir()
        (root / "blob.bin").write_bytes(b"\0a \n")
    (one / "prompt.md").write_text("Be brief.\n")
    (two / "prompt.md").write_bytes(b"Be brief.  \r\n\r\n")
    assert text_hash(one) == text_hash(two)
    (two / "blob.bin").write_bytes(b"\0a\n")  # not text: its bytes count
    assert text_hash(one) != text_hash(two)
    (two / "blob.bin").write_bytes(b"\0a \n")
    (two / "empty.md").write_text("")  # an added file is a change, even an empty one
    assert text_hash(one) != text_hash(two)


def test_the_text_hash_of_bytes_read_once_is_the_folders(tmp_path: Path) -> None:
    """What the near-repeat check reads from a screen's one read (``text_hash_of``) is what reading the
    folder gives, so an honest candidate is judged the same; a file changed after the read is not seen."""
    from pytest_capevolve._project.candidate import text_hash_of
    from pytest_capevolve._project.leak import read_candidate

    (tmp_path / "tools").mkdir()
    (tmp_path / "prompt.md").write_text("Be kind.  \r\n\r\n")
    (tmp_path / "tools" / "reply.py").write_text("def f():\n    return 1\n")
    (tmp_path / "z.bin").write_bytes(b"\0\1\2")
    _, files = read_candidate(tmp_path)
    assert text_hash_of(files) == text_hash(tmp_path)
    (tmp_path / "prompt.md").write_text("Be rude.\n")
    assert text_hash_of(files) != text_hash(tmp_path)
