"""Fields of a rollout item that are made on first use rather than carried by every item.

pytest keeps every item to the session's end (60,000 at 10k tasks × 3 trials × 2 tags), each
with ~0.9 KB of nearly always empty fields from ``Node.__init__``. :class:`MadeOnUse` makes such
a field on first use, and :func:`shed` drops one that holds nothing."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from _pytest.mark.structures import NodeKeywords


class MadeOnUse:
    """A field made by ``make(item)`` when first read, then an ordinary instance attribute that
    shadows this non-data descriptor; :func:`shed` deletes it when ``blank``. Values are set with
    ``setattr``, never through ``__dict__``, which CPython would build for every item."""

    def __init__(
        self, make: Callable[[Any], Any], *, blank: Callable[[Any, Any], bool] | None = None
    ) -> None:
        self.make = make
        self.blank = blank
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, item: Any, owner: type | None = None) -> Any:
        if item is None:
            return self
        value = self.make(item)
        setattr(item, self.name, value)
        return value


def shed(item: Any) -> None:
    """Delete every :class:`MadeOnUse` field of ``item`` that is blank (one never made is made
    and dropped: cheaper than asking the instance ``__dict__``, see :class:`MadeOnUse`)."""
    for made in _sheddable(type(item)):  # type: ignore[arg-type]  # a class is hashable; the cache stub says Hashable
        if made.blank(item, getattr(item, made.name)):  # type: ignore[misc]
            delattr(item, made.name)


@functools.cache
def _sheddable(cls: type) -> list[MadeOnUse]:
    fields = {
        name: made
        for klass in cls.__mro__
        for name, made in vars(klass).items()
        if isinstance(made, MadeOnUse)
    }
    return [made for name, made in fields.items() if made.blank is not None and getattr(cls, name) is made]


def empty(item: Any, value: Any) -> bool:
    return type(value) in (list, set) and not value


def empty_stash(item: Any, value: Any) -> bool:
    return type(value) is pytest.Stash and not len(value)


def fresh_keywords(item: Any, value: Any) -> bool:
    """Only the item's own name, as ``NodeKeywords`` starts (no marker added since)."""
    return type(value) is NodeKeywords and value.parent is item.parent and value._markers == {item.name: True}


class LeanItem(pytest.Item):
    """A ``pytest.Item`` whose per-node containers are :class:`MadeOnUse` (see the module
    docstring). Subclasses call :func:`shed` when they are built and when they have run."""

    keywords = MadeOnUse(NodeKeywords, blank=fresh_keywords)
    own_markers = MadeOnUse(lambda item: [], blank=empty)
    extra_keyword_matches = MadeOnUse(lambda item: set(), blank=empty)
    stash = MadeOnUse(lambda item: pytest.Stash(), blank=empty_stash)
    # copied into each report as it is made: dropped once the item has run (captured output too)
    _report_sections = MadeOnUse(lambda item: [], blank=lambda item, value: True)
    user_properties = MadeOnUse(lambda item: [], blank=empty)
    # pytest's cached_property would build the instance __dict__; computed once all the same
    location = MadeOnUse(pytest.Item.location.func)  # type: ignore[attr-defined]

    @property
    def _store(self) -> pytest.Stash:
        """pytest's deprecated alias of ``stash``, kept an alias (``Node.__init__`` sets it)."""
        return self.stash

    @_store.setter
    def _store(self, value: pytest.Stash) -> None:
        pass
