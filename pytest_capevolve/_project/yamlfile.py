"""Reading the YAML a user wrote (specs, split files, microcases): ``safe_load`` only, one error
form, pyyaml imported only when a file is read."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


class YamlError(ValueError):
    """The file is not valid YAML; the message names the file, the line and the column."""


def read_yaml(path: Path) -> Any:
    """``yaml.safe_load`` of ``path``; malformed YAML or bytes that are not UTF-8 raise :class:`YamlError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None
    return load_yaml(text, str(path))


def load_yaml(text: str, where: str) -> Any:
    """``safe_load`` that also refuses a key given twice in a mapping (YAML would keep the last)."""
    import yaml

    try:
        return yaml.load(text, Loader=_unique_keys_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlError(f"{where}{at}: malformed YAML: {problem}") from None


@functools.cache
def _unique_keys_loader() -> Any:
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _value in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: safe_load reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (keep one)", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader
