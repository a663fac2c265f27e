"""The hand-made run dir both halves of test_dashboard build a page from (tests/unit: the builder's
output; tests/e2e: the CLI on it), with the hostile text it carries and a parser for the page."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

from pytest_capevolve._store.rundir import RunDir

# Untrusted text that would break out of an SVG, a table, an attribute or start a script if it
# were not escaped; a script that ran would leave data-pwned on <body>.
HOSTILE = (
    "</svg></table></details><script>document.body.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\"> \"quoted\" 'single' & more"
)
HOSTILE_ID = '<b id="x">t2</b>'


class Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text, as the HTML parser sees them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    def having(self, tag: str, *classes: str) -> list[dict[str, str]]:
        return [
            attrs
            for name, attrs in self.tags
            if name == tag and set(classes) <= set(attrs.get("class", "").split())
        ]


def hand_made_run(root: Path, val_rollout) -> RunDir:
    """Three val tasks × two trials: ``seed`` everywhere; ``cand`` scores 0 on t1, has only
    infra errors on the hostile-id task and was never run on t3; two verdicts with numbers (one
    a null control), one refused before any rollout; one accept booked."""
    rundir = RunDir(root / ".capevolve" / "runs" / "r1")
    rundir.root.mkdir(parents=True)
    tasks = ["t1", HOSTILE_ID, "t3"]
    rundir.ensure_splits(lambda: {"train": [], "val": tasks, "test": []})
    for task in tasks:
        for k in range(2):
            record = val_rollout("seed", task, k, 1.0 if k == 0 else 0.0)
            rundir.rollouts.record_rollout(dataclasses.replace(record, feedback=HOSTILE, output=HOSTILE))
    for k in range(2):
        rundir.rollouts.record_rollout(val_rollout("cand", "t1", k, 0.0))
        rundir.rollouts.record_rollout(val_rollout("cand", HOSTILE_ID, k, None, infra=HOSTILE))
    common = {"against": "seed", "mode": "exact", "n_tasks": 3, "trials": 2, "p_value": 0.5}
    rundir.verdicts.write_verdict(
        {
            **common,
            "tag": "seed-null1",
            "decision": "reject",
            "basis": "exact",
            "null_control": True,
            "delta_mean": -0.1,
            "ci": [-0.3, 0.1],
            "reason": HOSTILE,
        }
    )
    rundir.verdicts.write_verdict(
        {
            **common,
            "tag": "cand",
            "decision": "accept",
            "basis": "exact",
            "null_control": False,
            "delta_mean": 0.2,
            "ci": [0.05, 0.35],
            "bar": 0.1,
            "reason": "p small",
        }
    )
    rundir.verdicts.write_verdict(
        {
            "tag": "refused",
            "against": "seed",
            "decision": "reject",
            "basis": "micro_test_fail",
            "n_tasks": 0,
            "reason": "failed a microcase before any rollout",
        }
    )
    rundir.log.append_event(
        "decision",
        tag="cand",
        parent="seed",
        decision="accept",
        basis=None,
        delta_mean=0.2,
        p_value=0.5,
        note=HOSTILE,
        optimizer_usd=0.5,
    )
    rundir.log.append_event("best_changed", best_id="cand", previous="seed")
    rundir.state.update_state(lambda s: s.update(best_id="cand"))
    return rundir
