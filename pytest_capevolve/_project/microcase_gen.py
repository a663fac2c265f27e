"""Skeleton microcases from failing rollouts (``capevolve microcase gen``): a rollout record in,
YAML out, the gold answer redacted (a candidate may come to read the file)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .microcase import PLACEHOLDER

REDACTED = "[gold answer redacted]"


def redact(text: str, gold: Any) -> str:
    """``text`` with every standalone occurrence of the gold answer replaced."""
    if gold is None:
        return text
    needle = gold if isinstance(gold, str) else json.dumps(gold, default=repr)
    if not needle.strip():
        return text
    pattern = re.escape(needle)
    if needle[0].isalnum():
        pattern = r"(?<![\w.])" + pattern
    if needle[-1].isalnum():
        pattern += r"(?![\w])"
    return re.sub(pattern, REDACTED, text)


def skeleton(record: dict[str, Any], *, cluster: str, case_id: str, gold: Any, source: str) -> str:
    """A microcase YAML to complete: the rollout's input, output and feedback (gold redacted)
    and an ``adapter`` check whose expectation is FILL_IN, so it cannot run until decided."""

    def plain(value: Any) -> str:
        return redact(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), gold)

    task_id = str(record["task_id"])
    description = "\n".join(
        [
            f"Scorer feedback: {plain(record.get('feedback') or '(none)')}",
            f"Input: {plain(record.get('input'))}",
            f"Output seen: {plain(record.get('output'))}",
            "Say here what the candidate should do instead.",
        ]
    )
    case = {
        "id": case_id,
        "cluster": cluster,
        "description": description,
        "origin": f"{record.get('split')}/{task_id}/{record.get('tag')}/t{record.get('trial')}",
        "adapter": {"task": task_id, "seed": record.get("seed"), "reward": {"min": PLACEHOLDER, "max": 1.0}},
    }
    reward = record.get("reward")
    header = [
        f"# Skeleton from {source}",
        f"# (task {task_id}, tag {record.get('tag')}, trial {record.get('trial')}, reward {reward}).",
        f"# Replace {PLACEHOLDER} with the reward a fixed candidate must reach, or swap the check:",
        "#   text:  {file: prompt.md, contains: ...}",
        "#   call:  {function: tools/x.py:name, args: [...], expect: {equals: ...}}",
        f"#   score: {{task: {task_id}, output: ..., reward: {{min: 1.0}}}}",
        "# The gold answer is never written here: this file may end up where a candidate can read it.",
    ]
    text = yaml.dump(case, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(header) + "\n" + text


class _BlockDumper(yaml.SafeDumper):
    """Safe dumping, with multi-line strings as readable ``|`` blocks."""


def _str_block(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_block)
