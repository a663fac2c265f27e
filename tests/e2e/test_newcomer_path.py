"""The newcomer's whole path on a fresh ``capevolve init`` project, as console commands played in
order (tests/docs_commands.py), docs/tutorial/your-project.md's among them — one walkthrough of
that page: its ``init`` → ``check`` → ``baseline`` → gate → ``commit``, then ``hill-climb`` and
a look at ``measure`` (which must not spend the test score), then the page's finalize (once; a
second is refused) → ``measure`` → ``dashboard``; then a new run, where the accepted candidate comes back as ``REPEAT`` and the
command that line names adopts it; then ``hill-climb --new-run``, as the first loop's note on
its ``constant`` run says, whose optimizer proposes those bytes again: adopted under the loop's
``addis`` (decided at α = 0.05 ≤ this run's α), and the loop goes on from them (issue 38: the
note's way on and the adoption do not contradict each other); the
report labels the adoption as booked, α and all (traps 1 and 3).

Each command must exit as written and print the lines under it (``…`` matches anything), so a
dead end anywhere on the path (an exit the next step cannot get past, a line naming a command
that fails) fails this test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from docs_commands import commands, play

# the pages' gains are checked against typical draws, in every session they start (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("typical_seed_draws")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial" / "your-project.md"
# the page's gate, as the newcomer reads it (the page shows the table; this line is under it)
GATE_NOTE = re.compile(
    r"val reuse \(constant\): 1 gate decision\(s\) on val so far, 1 decided but not booked: "
    r"`capevolve commit convert-units \. --run-id [\w-]+ --decision accept` books 'convert-units'; "
    r"the next gets α = 0\.05"
)

TO_A_LOOK = """
```console
$ cd my-agent
$ capevolve hill-climb --optimizer "python optimizer.py {workdir}" --max-iterations 2 --table
…
best 'convert-units'; …
stopped: max iterations: …
…froze gate_alpha_schedule constant…for addis, start it in a new run: capevolve hill-climb --optimizer 'python optimizer.py {workdir}' --max-iterations 2 --table --new-run (an accept of this run that its optimizer proposes again is adopted there, …
$ capevolve measure
test split sealed: this table is val only; `capevolve measure --finalize` scores the test split once …
…
test   best  convert-units  sealed: not finalized yet
```
"""

FINALIZE_AND_REPEAT = """
```console
$ cd my-agent
$ pytest --capevolve-run . --capevolve-new-run --capevolve-candidate candidates/convert-units --capevolve-gate --capevolve-commit none -q  # exit 15
…
convert-units  REPEAT  …
…
convert-units: nothing booked — repeat of 'convert-units' (accepted at α = 0.05…); `capevolve commit convert-units . --run-id … --decision accept` adopts that accept as this run's best (labelled, nothing paid; the next session pays its val rollouts once)
$ capevolve commit convert-units --decision accept
…"best": "convert-units", …"decision": "accept", …"label": "adopted: accepted against the same bytes as 'seed' in run …
$ capevolve hill-climb --optimizer "python optimizer.py {workdir}" --max-iterations 1 --table
…
cand_0001  …
stopped: max iterations: …
$ capevolve measure --finalize  # exit 4
…
NOTE the best 'convert-units' is adopted: accepted against the same bytes as 'seed' in run … not gated again
…
…Ways on: a new run whose split_ids_file leaves these tasks out of its test (write it into the spec before that run starts: the file is harness; a new split_seed would deal them in again), or acknowledge it with --capevolve-test-reused…
$ capevolve measure --finalize --test-reused
…
best − seed on test: +…
```
"""

THE_LOOP_PROPOSES_IT_AGAIN = """
```console
$ cd my-agent
$ capevolve hill-climb --optimizer "python optimizer.py {workdir}" --new-run --max-iterations 2
…
cand_0001: no gate, no rollout: byte-identical to 'convert-units' of another run
iter 1: ACCEPT cand_0001 vs seed: never paid for: byte-identical to 'convert-units' (accepted at α = 0.05…) in an earlier run against the same bytes as this run's best: adopted as this run's best, labelled, not gated again…
the best 'cand_0001' has no val rollouts in this run (booked unpaid, as an adoption is): paying them once in a plain evaluation session
iter 2: reject cand_0002 vs cand_0001 — repeat: …
$ capevolve measure
…
NOTE the best 'cand_0001' is adopted: accepted against the same bytes as 'seed' in run … under gate_alpha_schedule constant at α = 0.05, as recorded, not gated again
```
"""


@pytest.mark.autoload  # as a newcomer's sessions run: every installed plugin loaded
def test_the_newcomers_path_and_a_repeat_in_a_new_run_have_no_dead_end(tmp_path: Path) -> None:
    page = PAGE.read_text(encoding="utf-8")
    to_book, to_seal = page.split("\n## 6. ", 1)  # the page to its booking, and from its finalize
    assert len(commands(page)) >= 5 and commands(to_seal)[0].line == "pytest --capevolve-finalize . -q"
    booked = play(to_book, tmp_path)  # init, check, baseline, gate, commit, a second commit refused
    assert len(booked) == 6 and GATE_NOTE.search(booked[3][1].stdout + booked[3][1].stderr)
    assert len(play(TO_A_LOOK, tmp_path)) == 2
    (first,) = (tmp_path / "my-agent" / ".capevolve" / "runs").iterdir()
    # a look at the table spent nothing: the test split is still sealed and unread
    assert not (first / "seal.json").exists() and not (first / "rollouts" / "test").exists()
    assert len(play(to_seal, tmp_path / "my-agent")) == 4  # finalize, refused again, measure, dashboard
    # sealed: the dashboard's top shows the held-out gain
    top = (first / "dashboard.html").read_text(encoding="utf-8").split("</header>")[0]
    assert '<p class="delta">best − seed on test: +' in top
    assert len(play(FINALIZE_AND_REPEAT, tmp_path)) == 5
    runs = sorted((tmp_path / "my-agent" / ".capevolve" / "runs").iterdir())
    assert runs[0] == first and len(runs) == 2
    for run in runs:  # each run ends scored once, with the candidate as its best
        assert (run / "seal.json").is_file()
        assert json.loads((run / "state.json").read_text())["best_id"] == "convert-units"
    events = [json.loads(line) for line in (runs[1] / "events.jsonl").read_text().splitlines()]
    adopted = next(e for e in events if e["kind"] == "decision")  # the new run's first decision
    assert (adopted["tag"], adopted["decision"]) == ("convert-units", "accept"), adopted
    assert not any(e["kind"] == "rollout" for e in events[: events.index(adopted)])  # nothing paid
    report = (runs[1] / "report.md").read_text()
    lineage = next(line for line in report.splitlines() if line.startswith("1. `seed` → `convert-units`: "))
    assert "adopted: accepted against the same bytes as 'seed' in run " in lineage, lineage
    assert "at α = 0.05" in lineage and "Α" not in report + (runs[1] / "dashboard.html").read_text()
    assert "nothing new decided or booked" not in lineage  # it was booked: the ledger's row says so
    assert len(play(THE_LOOP_PROPOSES_IT_AGAIN, tmp_path)) == 2
    loop = sorted((tmp_path / "my-agent" / ".capevolve" / "runs").iterdir())[-1]
    assert json.loads((loop / "state.json").read_text())["best_id"] == "cand_0001"
