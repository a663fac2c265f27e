"""The sealed summary (``rollouts.summary.json``): each fact it stands in for edited between sessions.

A resume with nothing owed reads the summary's rows instead of the index's, each held to its file and
the log's checkpoint. Each replay edits one of those facts after a session wrote a summary, and shows
the next session either takes the full path and catches it exactly as before, or is unmoved because
nothing reads the edited fact before its own check. A file edited in place is its readers' to catch
(``test_attacks_rollout_bytes.py``)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from pytest_capevolve._cli.main import main
from pytest_capevolve._project import leak
from pytest_capevolve._project.candidate import content_hash
from pytest_capevolve._project.harness import TASKS_KEY
from pytest_capevolve._store.files import RunDirError
from pytest_capevolve._store.log.sealed_summary import SUMMARY_NAME, _decoded, _encoded
from pytest_capevolve._store.readers.harness_lock import locked_harness
from pytest_capevolve._store.rundir import RunDir


def _table(result) -> list[str]:
    """The session's per-tag table rows (what its rows came out as)."""
    return [line for line in result.stdout.str().splitlines() if line.startswith("seed ")]


def _events(rundir: Path, kind: str) -> list[dict]:
    lines = (rundir / "events.jsonl").read_text().splitlines()
    return [event for event in map(json.loads, lines) if event["kind"] == kind]


def _summarized(project, projects, capevolve) -> tuple[Path, list[str]]:
    """A run whose resume served from its summary: the run dir and the table it showed."""
    assert capevolve(project).ret == 0
    rundir = projects.run_dir(project)
    assert (rundir / SUMMARY_NAME).is_file() and _events(rundir, "rollouts_summarized")
    resumed = capevolve(project)
    resumed.stdout.fnmatch_lines(["rollouts: 0 paid, 12 reused*"])
    assert RunDir(rundir).rollouts.summary.rows() is not None  # it serves
    return rundir, _table(resumed)


def _rewrite_line(path: Path, kind: str, change) -> None:
    """The last line of ``kind`` in the log rewritten in place (its chain link left as it was)."""
    lines = path.read_text().splitlines()
    at = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == kind)
    event = json.loads(lines[at])
    change(event)
    lines[at] = json.dumps(event, sort_keys=True)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.attack(
    "record",
    attack=(
        "a rollout file deleted, or replaced by an edited copy renamed over it, after a session wrote "
        "the sealed summary (which a resume reads instead of each file's size and mtime), the "
        "folder's mtime set back with `os.utime`"
    ),
    outcome=(
        "caught as before: the summary binds each split folder's inode, mtime and ctime, and adding, "
        "removing or renaming a file moves the ctime, which `utime` cannot set back; the summary is "
        "not used, the full path logs the deleted file as vanished (a replaced one is quarantined: "
        "not its event's) and the next session pays it again"
    ),
)
@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_rollout_file_deleted_or_replaced_after_the_summary_is_paid_again(
    how, example, projects, capevolve
) -> None:
    project = example("toy_calc")
    rundir, _ = _summarized(project, projects, capevolve)
    folder = rundir / "rollouts" / "val"
    before = folder.stat()
    victim = sorted(folder.glob("*.json"))[0]
    if how == "deleted":
        victim.unlink()
    else:  # an edited copy renamed over it (as an editor saves): a new file under its name
        record = json.loads(victim.read_text())
        record["output"] = "forged"
        planted = folder / "planted.tmp"
        planted.write_text(json.dumps(record))
        os.replace(planted, victim)
    os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert folder.stat().st_mtime_ns == before.st_mtime_ns
    assert RunDir(rundir).rollouts.summary.rows() is None  # the ctime moved: not used
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["rollouts: 1 paid, 11 reused*"])
    rel = victim.relative_to(rundir).as_posix()
    if how == "deleted":
        assert [e["files"] for e in _events(rundir, "rollout_vanished")] == [[rel]]
    else:
        assert [e["file"] for e in _events(rundir, "rollout_quarantined")] == [rel]
    assert main(["verify", str(rundir)]) == 0


@pytest.mark.attack(
    "record",
    attack=(
        "the sealed summary edited (a failed rollout's reward raised to 1.0), or its chained line "
        "edited to the edited summary's sha256, or a rollout line appended after its line"
    ),
    outcome=(
        "caught: the summary serves only when its bytes are the sha256 of its line, the line is linked "
        "where it says it is (the next line records its hash) and no rollout, quarantine or vanish "
        "line follows it; else the session takes the full path (the index held to its files and the "
        "log) and shows what the log holds. Its line edited in place breaks the next line's link, and "
        "the session refuses the log as for any chained line"
    ),
)
@pytest.mark.parametrize("what", ["summary", "summary and its line", "a rollout after it"])
def test_an_edited_summary_or_summary_line_is_not_used(what, example, projects, capevolve) -> None:
    project = example("toy_calc")
    rundir, table = _summarized(project, projects, capevolve)
    path = rundir / SUMMARY_NAME
    summary = json.loads(path.read_text())
    reward = _decoded(summary["columns"][4])
    reward[reward.index(0.0)] = 1.0  # a failure shown as a pass
    summary["columns"][4] = _encoded(reward)
    text = json.dumps(summary, separators=(",", ":"))
    path.write_text(text)
    if what == "summary and its line":
        import hashlib

        digest = hashlib.sha256(text.encode()).hexdigest()
        _rewrite_line(rundir / "events.jsonl", "rollouts_summarized", lambda e: e.update(sha256=digest))
    elif what == "a rollout after it":  # a rollout line after it: not the log it summarized
        run = RunDir(rundir)
        event = next(e for e in run.log.events() if e["kind"] == "rollout")
        fields = {k: v for k, v in event.items() if k not in ("seq", "ts", "kind", "prev")}
        run.log.append_event("rollout", **fields)
    if what == "summary and its line":  # a chained line edited in place: refused, as any is
        with pytest.raises(RunDirError, match="rollouts_summarized event .* was edited after it was written"):
            RunDir(rundir).rollouts.summary.rows()
        result = capevolve(project)
        assert result.ret != 0 and "was edited after it was written" in result.stderr.str()
        return
    assert RunDir(rundir).rollouts.summary.rows() is None
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str()
    assert _table(result) == table  # what the log holds, not the edit
    result.stdout.fnmatch_lines(["rollouts: 0 paid, 12 reused*"])


@pytest.mark.attack(
    "record",
    attack=(
        "an index row edited (a failed rollout's reward raised to 1.0), or a `rollout` event's reward "
        "edited in the log, after a session wrote the sealed summary"
    ),
    outcome=(
        "harmless to a resume: it reads the summary's rows, bound to the log by their chained line, "
        "never the index (a full-path read holds the index to the log, as before); `capevolve verify` "
        "names the row, and the edited event's broken chain link, as before"
    ),
)
@pytest.mark.parametrize("what", ["index row", "event"])
def test_an_index_row_or_an_event_edited_after_the_summary_moves_no_number(
    what, example, projects, capevolve, capsys
) -> None:
    project = example("toy_calc")
    rundir, table = _summarized(project, projects, capevolve)
    if what == "index row":
        with sqlite3.connect(rundir / "index.sqlite") as db:
            db.execute("UPDATE rollouts SET reward = 1.0, passed = 1 WHERE reward = 0.0")
    else:
        _rewrite_line(rundir / "events.jsonl", "rollout", lambda e: e.update(reward=1.0))
    result = capevolve(project)
    assert result.ret == 0, result.stdout.str()
    assert _table(result) == table
    result.stdout.fnmatch_lines(["rollouts: 0 paid, 12 reused*"])
    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 1  # each named by verify, as before
    out = capsys.readouterr().out
    assert ("TAMPERED" if what == "event" else "MISMATCH") in out, out


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined, a sealed summary of forged rows written through the package's own API "
        "(`SealedSummary.write` under the run's lock: a correctly chained line, no line rewritten), or "
        "the summary edited with its chained line and the next line re-linked"
    ),
    outcome=(
        "not held by a session unconfined, as the index's rows and their checkpoint forged together are "
        "not (a gate with nothing owed reads them); `capevolve verify` holds the summary's rows to the "
        "outcome of every rollout line (no checkpoint trusted) and names it, `--repair` removes it and "
        "the next session reads the index and its files. Confined, the run dir is out of reach"
    ),
)
def test_a_forged_summary_written_through_the_api_is_named_by_verify_and_removed_by_repair(
    example, projects, capevolve, capsys
) -> None:
    project = example("toy_calc")
    rundir, honest = _summarized(project, projects, capevolve)
    run = RunDir(rundir)
    served = run.rollouts.summary.rows()
    assert served is not None
    version, rows = served
    forged = [(*r[:4], 1.0 - float(r[4] or 0.0), *r[5:]) if r[0] == "val" else r for r in rows]
    with run.lock():
        run.rollouts.summary.write(forged, version, run.rollouts.summary.stamps())
    assert RunDir(rundir).rollouts.summary.rows() is not None  # it would serve: the session trusts it

    capsys.readouterr()
    assert main(["verify", str(rundir)]) == 1
    said = capsys.readouterr()
    assert f"{SUMMARY_NAME}: 12 row(s) differ from the log's rollout events" in said.out + said.err
    assert "verify --repair" in said.out + said.err

    assert main(["verify", str(rundir), "--repair"]) == 0
    capsys.readouterr()
    assert not (rundir / SUMMARY_NAME).exists()
    assert RunDir(rundir).rollouts.summary.rows() is None
    resumed = capevolve(project)
    assert resumed.ret == 0 and _table(resumed) == honest  # the real outcomes, from the index


# a val id of noisy_agent's frozen splits (split_seed 7), three characters: the guard set to see it
LEAKED_VAL_ID = "n13"


def _screen_key(rundir: Path, candidate: Path) -> str:
    """The key the leak screen gives ``candidate`` against the seed, as an attacker can compute it."""
    run = RunDir(rundir)
    splits = run.splits() or {}
    guarded = {**dict.fromkeys(splits["val"], "val"), **dict.fromkeys(splits["test"], "test")}
    parent = content_hash(run.snapshots.snapshot_dir("seed"))
    tasks = (locked_harness(run) or {})[TASKS_KEY]
    return leak.screen_key(content_hash(candidate), parent, tasks, guarded, 3)


@pytest.mark.attack(
    "record",
    attack=(
        "the sealed summary's clean leak screens (`screens`) edited between sessions to hold the key a "
        "candidate naming a val task's id gets (computed as the screen computes it)"
    ),
    outcome=(
        "refused as before: the summary's bytes are no longer the sha256 of its line, so none of it "
        "serves, the screen builds the needles again and the candidate is indecisive and unpaid (leak)"
    ),
)
def test_a_leak_screen_planted_in_the_summary_does_not_pass_a_leaky_candidate(
    example, projects, capevolve
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    spec = project / "capevolve.yaml"
    spec.write_text(spec.read_text() + "leak_guard_min_length: 3\n")
    assert capevolve(project, "improved").ret == 0
    rundir = projects.run_dir(project)
    path = rundir / SUMMARY_NAME
    summary = json.loads(path.read_text())
    assert summary["screens"] == [_screen_key(rundir, project / "candidates" / "improved")]  # as computed
    peek = project / "candidates" / "peek"
    shutil.copytree(project / "capability", peek)
    with (peek / "prompt.md").open("a") as prompt:
        prompt.write(f"- For ticket {LEAKED_VAL_ID.upper()}, escalate at once.\n")
    summary["screens"] = [_screen_key(rundir, peek)]
    path.write_text(json.dumps(summary, separators=(",", ":")))
    result = capevolve(project, "peek", gate=True)
    assert result.ret == 11, result.stdout.str()[-3000:]  # indecisive
    assert f"holds the id of val task '{LEAKED_VAL_ID}'" in result.stdout.str()
    verdict = json.loads((rundir / "verdicts" / "peek.json").read_text())
    assert verdict["decision"] == "indecisive" and verdict["basis"] == "leak"
    assert not [k for k in projects.rollout_records(project) if k[2] == "peek"]  # nothing paid for it
