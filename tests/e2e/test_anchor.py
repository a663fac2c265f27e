"""Issue 24, a whole-record rewrite: every reward edited, the sha256 chain recomputed, the caches
rebuilt. No file-level guard can see it — ``verify`` says ok — but an anchor kept outside the
project (the head ``verify`` printed earlier, or the one the git store committed) is no longer
in the log, and ``verify --anchor`` refuses in one line."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main


def _gated_noop(noop_gated, projects):
    """A one-trial noisy_agent whose candidate ``noop`` is the seed's bytes, gated: REJECT (a copy
    of tests/conftest.py's ``noop_gated``, one build per process)."""
    return noop_gated, projects.run_dir(noop_gated)


def _verify(capsys, *words: str) -> tuple[int, str]:
    code = main(["verify", *words])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _head(output: str) -> str:
    line = next(line for line in output.splitlines() if line.startswith("head "))
    return line.split()[2]


def _rewrite_the_whole_record(run_dir: Path, tag: str) -> int:
    """What someone with write access to everything does: ``tag``'s rewards set to 1 in its
    rollout files and their events, every ``prev`` recomputed, the caches deleted (``verify
    --repair`` rebuilds them). Returns the rollouts rewritten."""
    rewritten = 0
    for path in rollout_files(run_dir, tag):
        record = json.loads(path.read_text())
        if record.get("infra_error") is None:
            record["reward"] = 1.0
            path.write_text(json.dumps(record))
            rewritten += 1
    lines, prev = [], "0" * 64
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "rollout" and event["tag"] == tag and event.get("infra_error") is None:
            event["reward"] = 1.0
        event["prev"] = prev
        text = json.dumps(event, sort_keys=True, ensure_ascii=False)
        prev = hashlib.sha256(text.encode()).hexdigest()
        lines.append(text)
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    for cache in ("state.json", "index.sqlite", "events_digest.json", "views.json"):
        (run_dir / cache).unlink(missing_ok=True)
    return rewritten


@pytest.mark.attack(
    "record",
    attack="the same forger, also logging a claim of its own through the API",
    outcome=(
        "**not held by a file-level guard**: one user writes the log; the kernel boundary (the record "
        "written only from outside it, issue 37) holds it, and `verify --anchor` names a rewritten "
        "history"
    ),
)
@pytest.mark.attack(
    "laundering",
    attack=(
        "`.capevolve` moved away or deleted whole (and with it every record of the project's decisions "
        "and seals), then refuted bytes gated afresh and the test tasks scored again"
    ),
    outcome=(
        "**not held by a file-level guard**: nothing left in the project says it decided or scored "
        "anything, and nothing outside it is consulted; the anchor is the answer (`verify --anchor "
        "HASH` fails on a history that no longer holds the anchored run)"
    ),
)
def test_a_rewritten_record_passes_verify_but_not_its_old_anchor(
    noop_gated, example, projects, capevolve, capsys
):
    project, run_dir = _gated_noop(noop_gated, projects)
    code, out = _verify(capsys, str(project))
    assert code == 0, out
    anchor = _head(out)
    assert len(anchor) == 64
    code, out = _verify(capsys, str(project), "--anchor", anchor)
    assert code == 0 and "ok anchor" in out, out

    assert _rewrite_the_whole_record(run_dir, "noop") > 0
    code, out = _verify(capsys, str(project), "--repair")  # the caches rebuilt from the new chain
    code, out = _verify(capsys, str(project))
    assert code == 0, out  # nothing a file-level check can see
    assert _head(out) != anchor

    code, out = _verify(capsys, str(project), "--anchor", anchor)
    assert code == 1
    refusals = [line for line in out.splitlines() if line.startswith("ANCHOR")]
    assert len(refusals) == 1 and anchor in refusals[0] and "rewritten" in refusals[0]


def test_an_anchor_older_than_the_head_still_holds_while_the_prefix_is_intact(
    noop_gated, example, projects, capevolve, capsys
):
    project, run_dir = _gated_noop(noop_gated, projects)
    code, out = _verify(capsys, str(project))
    anchor = _head(out)
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "auto"])  # the log grows
    assert result.ret == 10, result.stdout.str()[-2000:]
    code, out = _verify(capsys, str(project), "--anchor", anchor)
    assert code == 0, out
    assert _head(out) != anchor and "ok anchor" in out


def test_a_malformed_anchor_is_a_usage_error_in_one_line(noop_gated, example, projects, capevolve, capsys):
    project, _ = _gated_noop(noop_gated, projects)
    for bad in ("abc123", "z" * 64, ""):
        code, out = _verify(capsys, str(project), "--anchor", bad)
        assert code == 4, out
        assert [line for line in out.splitlines() if line.startswith("error")] == [out.splitlines()[-1]]


def test_the_git_store_commits_the_head_and_verify_reads_it(example, capsys):
    project = example("toy_calc")
    optimizer = f"{sys.executable} optimizer.py {{workdir}} {{prompt}}"
    code = main(["hill-climb", str(project), "--optimizer", optimizer, "--max-iterations", "1", "--json"])
    capsys.readouterr()
    assert code == 0
    run_dir = next((project / ".capevolve" / "runs").iterdir())
    code, out = _verify(capsys, str(project), "--anchor-from-store")
    assert code == 0 and "ok anchor" in out, out

    assert _rewrite_the_whole_record(run_dir, "seed") > 0
    _verify(capsys, str(project), "--repair")
    code, out = _verify(capsys, str(project))
    assert code == 0, out
    code, out = _verify(capsys, str(project), "--anchor-from-store")
    assert code == 1 and "ANCHOR" in out, out


def test_a_store_without_an_anchor_is_one_line(noop_gated, tmp_path, example, projects, capevolve, capsys):
    project, _ = _gated_noop(noop_gated, projects)
    code, out = _verify(capsys, str(project), "--anchor-from-store", str(tmp_path / "nowhere"))
    assert code == 4
    assert (
        "no git candidate store" in out
        and len([ln for ln in out.splitlines() if ln.startswith("error")]) == 1
    )
