"""Issue 24, attacks on the record (1, 5, 6): an optimizer with a shell edits the run dir's
views — a verdict file, the seal, state.json — and asks for a decision. The log is the record:
each edit is refused in one line naming the file, never used."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import replace
from fnmatch import fnmatch

import pytest
from run_log import rollout_files

from pytest_capevolve._cli.main import main
from pytest_capevolve._store.rundir import RunDir


def _gated_noop(noop_gated, projects):
    """A one-trial noisy_agent whose candidate ``noop`` is the seed's bytes, gated: REJECT (a copy
    of tests/conftest.py's ``noop_gated``, one build per process)."""
    return noop_gated, projects.run_dir(noop_gated)


def _cli(capsys, *words: str) -> tuple[int, str]:
    code = main(list(words))
    return code, capsys.readouterr().err


@pytest.mark.attack(
    "record",
    attack='a verdict file edited to `"decision": "accept"`, then `capevolve commit --decision accept`',
    outcome="refused: the verdict's sha256 is in its log event",
)
def test_a_forged_verdict_is_not_booked(noop_gated, example, projects, capevolve, capsys):
    project, run_dir = _gated_noop(noop_gated, projects)
    path = run_dir / "verdicts" / "noop.json"
    verdict = json.loads(path.read_text())
    assert verdict["decision"] == "reject"
    verdict["decision"] = "accept"
    path.write_text(json.dumps(verdict, indent=2))
    code, err = _cli(capsys, "commit", "noop", "--project", str(project), "--decision", "accept")
    assert code == 2
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]  # one line
    assert "noop.json" in err and "edited" in err
    state = json.loads((run_dir / "state.json").read_text())
    assert state["best_id"] == "seed"
    assert not [
        e
        for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "decision"
    ]


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: the verdict files of a run whose candidate code ran unconfined edited to say "
        '`"candidate_code": "confined (Landlock ABI 7)"` (or their numbers and reasons): `capevolve '
        'measure`, report.md and the dashboard said "candidate code: confined", read from the files '
        "unchecked"
    ),
    outcome=(
        "refused in one line naming the file (exit 4): every verdict a view shows is held to the sha256 "
        "its `verdict` event logged; restored, the views say unconfined. `capevolve verify` names each "
        "verdict file edited, or planted with no event"
    ),
)
@pytest.mark.unconfined
def test_verdict_files_edited_to_say_confined_are_refused_by_the_views(noop_gated, projects, capsys):
    """Unconfined on purpose: the label to forge is an unconfined run's."""
    project, run_dir = _gated_noop(noop_gated, projects)
    kept = {path: path.read_bytes() for path in (run_dir / "verdicts").glob("*.json")}
    for path in kept:
        verdict = json.loads(path.read_text())
        assert verdict["confinement"]["candidate_code"].startswith("unconfined")
        verdict["confinement"]["candidate_code"] = "confined (Landlock ABI 7)"
        path.write_text(json.dumps(verdict))
    capsys.readouterr()
    code = main(["measure", str(project)])
    out, err = capsys.readouterr()
    assert code == 4 and "code: confined" not in out  # before: 0, "candidate code: confined"
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]
    assert "verdicts/" in err and "not the verdict the gate wrote" in err and "restore it" in err
    assert "code: confined" not in (run_dir / "report.md").read_text()
    from pytest_capevolve._show.dashboard.model import collect
    from pytest_capevolve._store.files import RunDirError

    with pytest.raises(RunDirError, match="not the verdict the gate wrote"):
        collect(RunDir(run_dir), num_trials=1)
    (run_dir / "verdicts" / "ghost.json").write_text(json.dumps({"tag": "ghost", "decision": "accept"}))
    capsys.readouterr()
    assert main(["verify", str(run_dir)]) == 1  # verify names each edited and the planted one
    said = capsys.readouterr().out
    assert said.count("(edited); restore it from a backup") == len(kept), said
    assert "ghost.json: a verdict no gate logged (planted); delete it" in said
    (run_dir / "verdicts" / "ghost.json").unlink()
    for path, data in kept.items():
        path.write_bytes(data)
    assert main(["measure", str(project)]) == 0
    assert "candidate code: unconfined (Landlock turned off" in capsys.readouterr().out


@pytest.mark.attack(
    "record",
    attack="`best_id` edited in `state.json` (finalize would score a rejected tag)",
    outcome="refused by sessions and commands",
)
def test_an_edited_best_id_is_refused_by_sessions_and_commands(
    noop_gated, example, projects, capevolve, capsys
):
    project, run_dir = _gated_noop(noop_gated, projects)
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text())
    state["best_id"] = "noop"  # the rejected tag made best by hand: finalize would score it
    state_path.write_text(json.dumps(state))
    result = capevolve(project, finalize=True)
    assert result.ret == 4
    assert "best_id is 'noop', but the event log adds up to 'seed'" in result.stderr.str()
    code, err = _cli(
        capsys, "commit", "noop", "--project", str(project), "--decision", "reject", "--reject-basis", "gate"
    )
    assert code != 0 and "state.json was edited" in err


@pytest.mark.attack(
    "record",
    attack="`seal.json` deleted after finalize (to gate again, or to score test twice)",
    outcome="prevented: the seal is the log's `test_scored` event",
)
def test_deleting_the_seal_file_reopens_nothing(one_trial_baseline, projects, capevolve, capsys):
    project = one_trial_baseline  # a copy of one build per process
    assert capevolve(project, finalize=True).ret == 0
    run_dir = projects.run_dir(project)
    (run_dir / "seal.json").unlink()
    again = capevolve(project, finalize=True)
    assert again.ret == 4 and "already scored" in again.stderr.str()
    gate = capevolve(project, "improved", gate=True)
    assert gate.ret != 0
    scored = [
        e
        for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "test_scored"
    ]
    assert len(scored) == 1  # scored exactly once, the file gone or not
    assert main(["runs", "--project", str(project), "--json"]) == 0
    assert '"test": "scored"' in capsys.readouterr().out.replace("'", '"')
    code = main(["measure", "--project", str(project), "--finalize"])
    measured = capsys.readouterr()
    assert code == 0 and "seal.json is missing" in measured.out + measured.err


@pytest.mark.attack(
    "record",
    attack="val tasks dropped from `splits.json`, or a test task moved into val",
    outcome="refused: `splits.json` is held to its `splits_frozen` event",
)
def test_val_tasks_dropped_from_the_splits_file_are_refused(noop_gated, example, projects, capevolve):
    project, run_dir = _gated_noop(noop_gated, projects)
    path = run_dir / "splits.json"
    splits = json.loads(path.read_text())
    splits["val"] = splits["val"][:-3]  # drop the tasks the candidate lost
    path.write_text(json.dumps(splits))
    result = capevolve(project, "noop", gate=True)
    assert result.ret == 4
    assert "not the splits the run froze" in result.stderr.str()
    splits["val"] = [*splits["val"][:-1], splits["test"][0]]  # a test task moved into val, sizes kept
    path.write_text(json.dumps(splits))
    assert "not the splits the run froze" in capevolve(project, "noop", gate=True).stderr.str()


@pytest.mark.attack(
    "inputs",
    attack="a real candidate tagged `seed-null1` (or `Seed-Null1`), or `seed` for another folder",
)
def test_a_case_twin_of_a_null_control_name_is_reserved_too(example, projects, capevolve):
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    result = capevolve(project, "regressed", tags=["Seed-Null1"])
    assert result.ret == 4 and "reserved" in result.stderr.str()


def _gate_json(capsys, project) -> dict:
    main(["gate", "noop", "--project", str(project), "--json"])
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _forge_wins(files) -> list[str]:
    """Every failed rollout of ``files`` edited to a pass, size and mtime kept (so a stat of the
    file sees nothing): what an optimizer with a shell does to turn REJECT into ACCEPT."""
    forged = []
    for path in files:
        text, stat = path.read_text(), path.stat()
        edited = text.replace('"reward": 0.0', '"reward": 1.0')
        if edited != text:
            path.write_text(edited)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            forged.append(json.loads(edited)["task_id"])
    return forged


@pytest.mark.attack(
    "record",
    attack="rewards edited in rollout files, with size and mtime kept",
    outcome=(
        "prevented: each file read is held to its `rollout` event; the edit is quarantined and paid again"
    ),
)
def test_rewards_edited_in_the_files_are_never_used(noop_gated, example, projects, capevolve, capsys):
    """Attack 8: rewards edited in rollout files (size and mtime kept) flip nothing: a file read
    is held to its event, so the edit is quarantined and the logged outcome is what is gated."""
    project, run_dir = _gated_noop(noop_gated, projects)
    before = _gate_json(capsys, project)
    assert before["decision"] == "reject"
    forged = _forge_wins(rollout_files(run_dir, "noop"))
    assert forged
    # the index still holds the logged rows: a gate reading rows alone sees no change ...
    assert _gate_json(capsys, project)["delta_mean"] == before["delta_mean"]
    # ... and a reader of the files (diagnose, a session's full reads) quarantines every forgery
    reader = RunDir(run_dir)
    read = {r.task_id for r in reader.rollouts.rollouts("val") if r.tag == "noop"}
    assert read and not read & set(forged)  # every forged file is out, every other one read
    assert sum("but its rollout event logged reward 0.0" in n for n in reader.notices) == len(forged)
    assert _gate_json(capsys, project)["decision"] != "accept"  # missing data, never a win
    # missing data, paid again: the same seeded agent gives the same outcomes, and the same REJECT
    again = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert again.ret == 10, again.stdout.str()[-2000:]
    after = _gate_json(capsys, project)
    assert (after["decision"], after["delta_mean"]) == ("reject", before["delta_mean"])


@pytest.mark.attack(
    "record",
    attack="index rows zeroed or turned into passes (by hand, or by candidate code during its own gate)",
    outcome="prevented: rows are held to the log's outcomes and read again",
)
def test_index_rows_edited_by_hand_are_read_again_from_the_log(
    noop_gated, example, projects, capevolve, capsys
):
    """Attack 8: the index's rows zeroed or turned into passes (sqlite3 by hand, or the
    candidate's own code during its gate): the rows are held to the log's outcomes — a digest
    the leaving session logged — and read again; the gate's numbers do not move."""
    project, run_dir = _gated_noop(noop_gated, projects)
    before = _gate_json(capsys, project)
    checkpoints = [
        e
        for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "outcomes_checked"
    ]
    assert checkpoints and checkpoints[-1]["rollouts"] > 0
    db = sqlite3.connect(run_dir / "index.sqlite")
    with db:
        db.execute("UPDATE rollouts SET reward = 1.0, infra_error = NULL WHERE tag = 'noop'")
        db.execute("UPDATE rollouts SET reward = 0.0 WHERE tag = 'seed'")
    db.close()
    after = _gate_json(capsys, project)
    assert (after["decision"], after["delta_mean"]) == (before["decision"], before["delta_mean"])
    reader = RunDir(run_dir)
    logged = {
        (e["split"], e["task_id"], e["tag"], e["trial"]): e["reward"]
        for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "rollout" and e["split"] == "val"
    }
    assert {r.key: r.reward for r in reader.rollouts.indexed_rollouts("val", None, None)} == logged


def _planted_rows(run: RunDir, tag: str) -> list[tuple]:
    """A pass for each of the seed's val rollouts under ``tag``, as an index row naming a file planted
    beside the paid ones (written in the rollout format, with its size and mtime): no session paid it."""
    from pytest_capevolve._store.rollouts.index import record_of, row_of

    planted = []
    for row in (r for r in run.rollouts.index.every() if r[0] == "val" and r[1] == "seed"):
        record = replace(record_of(row), tag=tag, reward=1.0, passed=True)
        path = run.rollout_path("val", record.task_id, tag, record.trial)
        path.write_text(record.dumps() + "\n")
        planted.append(row_of(record, path, path.stat()))
    return planted


def _summary_forged(run: RunDir, tag: str, reward: float) -> None:
    """The sealed summary rewritten through the API with a row for each of the seed's val rollouts
    under ``tag`` (each ``reward``), no file and no session behind them."""
    from pytest_capevolve._store.log.sealed_summary import SealedSummary
    from pytest_capevolve._store.rollouts.index import record_of, row_of

    every = run.rollouts.index.every()
    rows = [
        row_of(replace(record_of(r), tag=tag, reward=reward, passed=reward >= 1.0))
        for r in every
        if r[0] == "val" and r[1] == "seed"
    ]
    summary = SealedSummary(run.root, run.log)
    with run.lock():
        summary.write(sorted([*every, *rows], key=lambda r: r[:4]), "forged", summary.stamps())


def _forge_checkpoint(run_dir, how: str) -> None:
    """The newest ``outcomes_checked`` digest made the index's rows' (forged ones included): its line
    rewritten and the log's tail after it re-linked, or a new one appended through the package's API."""
    from pytest_capevolve._store.log.event_chain import event_line_hash
    from pytest_capevolve._store.log.event_kinds import OUTCOMES_CHECKED, SESSION_LEFT
    from pytest_capevolve._store.log.outcome_ledger import digest_of, outcome

    run = RunDir(run_dir)
    listed = run.rollouts.index.every()
    digest = digest_of([((r[0], r[1], r[2], int(r[3])), outcome(r[4], r[6], r[7])) for r in listed])
    log = run_dir / "events.jsonl"
    lines = log.read_text().splitlines()
    at = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "outcomes_checked")
    tail = {json.loads(line)["kind"] for line in lines[at + 1 :]}
    assert tail <= {"session_left", "session_finished", "rollouts_summarized"}
    if how == "appended":  # chained at the end: nothing rewritten, no claim needed
        last = {k: v for k, v in json.loads(lines[at]).items() if k not in ("seq", "ts", "kind", "prev")}
        with run.lock():
            size, _, seq = run.log.tail()
            run.log.append_event(OUTCOMES_CHECKED, **{**last, "offset": size, "upto": seq, "digest": digest})
            run.log.append_event(SESSION_LEFT, checkpoint=run.log.last_seq())
        return
    lines[at] = json.dumps({**json.loads(lines[at]), "digest": digest}, sort_keys=True, ensure_ascii=False)
    for i in range(at + 1, len(lines)):  # the tail re-linked: the chain verifies end to end
        relinked = {**json.loads(lines[i]), "prev": event_line_hash(lines[i - 1])}
        lines[i] = json.dumps(relinked, sort_keys=True, ensure_ascii=False)
    log.write_text("\n".join(lines) + "\n")


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: index rows planted for a no-op's val rollouts that no session paid (each a pass, "
        "its file beside the paid ones) and the newest `outcomes_checked` digest made theirs (its line "
        "rewritten and the log's tail after it re-linked, or a new one appended through the API: no "
        "claim needed), the sealed summary deleted; or the sealed summary itself forged with those rows "
        "and a `rollouts_summarized` line appended through the API: a gate with nothing owed read them "
        "(0 paid) and ACCEPTed the no-op, exit 0 (a sequential gate too, its e-process crossing after "
        "10 of 12 tasks)"
    ),
    outcome=(
        "refused before any verdict (exit 11): a checkpoint speeds a resume, but the rows a decision "
        "reads are held to the log's own rollout events (each an outcome its key's event recorded), "
        "naming the rows and the way on (delete the caches; `capevolve verify` names every row)"
    ),
)
@pytest.mark.parametrize(
    "forged, how",
    [("index", "tail rewritten"), ("index", "appended"), ("summary", "appended"), ("summary", "sequential")],
)
def test_rows_and_their_checkpoint_forged_in_the_logs_tail_do_not_decide(
    forged, how, toy_calc_baseline, projects, capevolve, capsys
) -> None:
    from pytest_capevolve._store.log.sealed_summary import SUMMARY_NAME

    project = toy_calc_baseline
    shutil.copytree(project / "capability", project / "candidates" / "noop")
    (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")
    run_dir = projects.run_dir(project)
    run = RunDir(run_dir)
    if forged == "index":
        planted = _planted_rows(run, "noop")
        with sqlite3.connect(run_dir / "index.sqlite") as db:
            db.executemany(f"INSERT INTO rollouts VALUES ({', '.join('?' * len(planted[0]))})", planted)
        _forge_checkpoint(run_dir, how)
        (run_dir / SUMMARY_NAME).unlink()  # without it, the full path: rows trusted on the checkpoint
    else:  # no file planted: the summary's rows are read without one
        _summary_forged(run, "noop", 1.0)
    capsys.readouterr()
    assert main(["verify", str(run_dir)]) == 1  # verify names them (the index's against their files)
    extra = ["--capevolve-null", "0", "--capevolve-commit", "none"]
    extra += ["--capevolve-sequential"] if how == "sequential" else []  # its e-process reads them too
    gated = capevolve(project, "noop", gate=True, extra=extra)
    out = gated.stdout.str() + gated.stderr.str()
    assert gated.ret == 11, out[-2000:]  # before: "noop  ACCEPT", exit 0
    assert "noop  ACCEPT" not in out
    assert "rollout row(s) a decision would read are not an outcome the log's rollout events recorded" in out
    assert "val q" in out and "noop t0 says reward 1.0" in out and "no rollout event records it" in out
    # the way on: the caches deleted, the next gate pays the no-op's rollouts and decides on them
    for cache in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm", SUMMARY_NAME):
        (run_dir / cache).unlink(missing_ok=True)
    again = capevolve(project, "noop", gate=True, extra=extra)
    assert again.ret == 10, again.stdout.str()[-2000:]
    assert "rollouts: 12 paid" in again.stdout.str()


@pytest.mark.attack(
    "record",
    attack="the outcomes digest that lets a reader trust the index edited to match forged rows",
    outcome="refused: the event's hash link breaks",
)
def test_an_edited_outcome_digest_is_refused(noop_gated, example, projects, capevolve):
    """The digest that lets the next reader trust the index in one pass is itself an event:
    edited (to match forged rows) it breaks the chain, and the session refuses in one line."""
    project, run_dir = _gated_noop(noop_gated, projects)
    events = run_dir / "events.jsonl"
    lines = events.read_text().splitlines()
    at = max(i for i, line in enumerate(lines) if '"kind": "outcomes_checked"' in line)
    event = json.loads(lines[at])
    event["digest"] = "0" * 64
    lines[at] = json.dumps(event, sort_keys=True)
    events.write_text("\n".join(lines) + "\n")
    result = capevolve(project, "noop", gate=True, extra=["--capevolve-commit", "none"])
    assert result.ret == 4, result.stdout.str()[-1500:]
    assert "outcomes_checked event seq" in result.stderr.str() and "edited" in result.stderr.str()


def _state_edited(run_dir, change) -> None:
    path = run_dir / "state.json"
    state = json.loads(path.read_text())
    change(state)
    path.write_text(json.dumps(state))


@pytest.mark.attack(
    "record",
    attack="`spent` set back to 0 in `state.json`, so the next session looks affordable",
    outcome=(
        "refused in one line by the session and by every command that reads the state: each counter a "
        "decision reads is held to the log"
    ),
)
def test_a_spend_reset_in_state_json_does_not_get_past_max_metric_calls(example, projects, capevolve, capsys):
    """Attack 6: ``spent`` set back to 0 in state.json, so the next session looks affordable.
    Refused in one line by the session and by every command that reads the state."""
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    projects.edit_spec(project, "max_metric_calls: 20000", "max_metric_calls: 45")
    assert capevolve(project).ret == 0  # the baseline: 40 val rollouts paid
    run_dir = projects.run_dir(project)
    honest = capevolve(project, "improved")
    assert honest.ret == 4 and "max_metric_calls" in honest.stderr.str()  # 40 + 40 > 45

    def reset(state):
        state["spent"]["metric_calls"], state["spent"]["usd"] = 0, 0.0

    _state_edited(run_dir, reset)
    forged = capevolve(project, "improved")
    assert forged.ret == 4
    err = forged.stderr.str()
    assert "spent.metric_calls is 0, but the event log adds up to" in err and "state.json was edited" in err
    assert not rollout_files(run_dir, "improved")  # nothing paid
    capsys.readouterr()
    code = main(["spend", "--project", str(project)])
    err = capsys.readouterr().err
    assert code != 0 and [line for line in err.splitlines() if line.strip()] == [err.strip()]
    assert "state.json was edited" in err


@pytest.mark.attack(
    "record",
    attack="`spent` set back to 0 in `state.json`, so the next session looks affordable",
    note="`iterations`, `stall` and the optimizer's spend too",
)
def test_every_counter_a_decision_reads_is_checked_against_the_log(
    noop_gated, example, projects, capevolve, capsys
):
    """The same one check covers ``iterations``, ``stall`` and the optimizer's spend (what
    ``max_iterations``, ``stall`` and ``max_usd`` stop on), and the spend mark itself."""
    project, run_dir = _gated_noop(noop_gated, projects)
    capsys.readouterr()
    assert (
        main(["commit", "noop", "--project", str(project), "--decision", "reject", "--reject-basis", "gate"])
        == 0
    )
    capsys.readouterr()
    original = (run_dir / "state.json").read_text()
    edits = {
        "iterations": lambda s: s.update(iterations=0),
        "stall": lambda s: s.update(stall=0),
        "spent.optimizer_usd": lambda s: s["spent"].update(optimizer_usd=-5.0),
        "spent.metric_calls": lambda s: s.pop("spent_through"),  # "current to the end", spend kept low
    }
    for field, edit in edits.items():
        (run_dir / "state.json").write_text(original)
        if field == "spent.metric_calls":
            _state_edited(run_dir, lambda s: s["spent"].update(metric_calls=1))
        _state_edited(run_dir, edit)
        code = main(["spend", "--project", str(project), "--json"])
        err = capsys.readouterr().err
        assert code != 0, field
        assert f"{field} is " in err and "state.json was edited" in err, (field, err)
    (run_dir / "state.json").write_text(original)
    assert main(["spend", "--project", str(project), "--json"]) == 0


@pytest.mark.attack(
    "laundering",
    attack=(
        "an accept forced against the gate (`commit --force`, p = 1) in one run, its bytes gated again in "
        "a new run (`REPEAT`) and adopted with `capevolve commit --decision accept` (inside `capevolve "
        'agent --`): booked `"forced": false`, labelled "adopted: accepted … at α = 0.05, not gated '
        'again", so every view of the new run showed a gate accept'
    ),
    outcome=(
        "refused in one line, by the session's REPEAT line and by `commit`: only a gate's accept is "
        "adopted, naming the way on (change the bytes and gate them)"
    ),
)
def test_a_forced_accept_is_not_adopted_by_a_new_run(example, projects, capevolve, capsys):
    project = example("toy_calc")
    shutil.copytree(project / "capability", project / "candidates" / "brief")
    with (project / "candidates" / "brief" / "prompt.md").open("a") as handle:
        handle.write("Be brief.\n")  # the seed's answers: p = 1
    assert capevolve(project, "brief", gate=True, extra=["--capevolve-commit", "none"]).ret == 10
    assert main(["commit", "brief", "--project", str(project), "--decision", "accept", "--force"]) == 0
    again = capevolve(
        project, "brief", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "none"]
    )
    assert again.ret == 15, again.stdout.str()[-2000:]  # REPEAT
    said = "was accepted in run * against its gate (which said 'reject'): only a gate's accept is adopted"
    again.stdout.fnmatch_lines([f"brief: nothing booked — repeat of 'brief' *; 'brief' {said}; gate a*"])
    capsys.readouterr()
    assert main(["commit", "brief", "--project", str(project), "--decision", "accept"]) == 2
    err = capsys.readouterr().err
    assert fnmatch(err, f"*{said}; gate a changed version*"), err
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "seed"


@pytest.mark.attack(
    "laundering",
    attack=(
        "bytes accepted in one run; a new run whose val only overlaps that one (`split_val` 0.5 → 0.55) "
        "gated them, `REPEAT`, and `capevolve commit --decision accept` adopted an accept decided on "
        "other tasks (only a disjoint val was refused)"
    ),
    outcome="refused in one line naming the two vals and the way on (gate a changed version)",
)
def test_an_accept_on_an_overlapping_val_is_not_adopted(example, projects, capevolve, capsys):
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True).ret == 0  # accepted, booked
    projects.edit_spec(project, "split_val: 0.5", "split_val: 0.55")
    projects.edit_spec(project, "split_train: 0.25", "split_train: 0.2")
    again = capevolve(
        project, "careful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "none"]
    )
    assert again.ret == 15, again.stdout.str()[-2000:]  # REPEAT
    capsys.readouterr()
    assert main(["commit", "careful", "--project", str(project), "--decision", "accept"]) == 2
    err = capsys.readouterr().err
    said = "on another val (run * on a val of 12 tasks sharing * of this run's 13): an accept decided on"
    assert fnmatch(err, f"*'careful' was accepted in run * {said} other tasks is not adopted; gate a*"), err


@pytest.mark.attack(
    "laundering",
    attack=(
        "bytes accepted in one run adopted by a new run started after a harness change (the scorer "
        'fixed): `REPEAT` ("the harness differs"), then `capevolve commit --decision accept` (brokered '
        "for the agent) made them the new run's best, measured only under the old harness"
    ),
    outcome=(
        "refused in one line: an accept measured under another harness is not adopted, naming the way "
        "on (gate it again with `--capevolve-harness-changed`, labelled)"
    ),
)
def test_an_accept_from_another_harness_is_not_adopted(example, projects, capevolve, capsys):
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True).ret == 0  # accepted, booked
    with (project / "adapter.py").open("a") as handle:
        handle.write("# the scorer fixed\n")
    again = capevolve(
        project, "careful", gate=True, extra=["--capevolve-new-run", "--capevolve-commit", "none"]
    )
    assert again.ret == 15, again.stdout.str()[-2000:]  # REPEAT, "the harness differs"
    capsys.readouterr()
    assert main(["commit", "careful", "--project", str(project), "--decision", "accept"]) != 0
    said = capsys.readouterr().err
    assert "under another harness" in said and "--capevolve-harness-changed" in said, said


@pytest.mark.attack(
    "record",
    attack=(
        "unconfined: the sealed summary forged (through the API) with rows for a candidate's val rollouts "
        "that no session paid, each a fail, before a subset screen of it: the screen read them, KILLed "
        "it and booked a reject (`screen_kill`) with nothing paid"
    ),
    outcome=(
        "refused (exit 11), nothing booked: a screen's kill books a decision, so it reads the rows as a "
        "gate does, each held to the log's rollout events (and at its first valid outcome)"
    ),
)
def test_a_screen_does_not_kill_on_rows_no_session_paid(one_trial_baseline, projects, capevolve) -> None:
    project = one_trial_baseline
    shutil.copytree(project / "capability", project / "candidates" / "noop")
    (project / "candidates" / "noop" / "notes.md").write_text("a no-op for the agent\n")
    run_dir = projects.run_dir(project)
    _summary_forged(RunDir(run_dir), "noop", 0.0)
    screened = capevolve(project, "noop", extra=["--capevolve-screen", "1"])
    out = screened.stdout.str() + screened.stderr.str()
    assert screened.ret == 11, out[-2000:]  # before: "screen noop (tier1, 10 tasks): KILL", booked, exit 10
    assert "KILL" not in out and "no rollout event records it" in out
    kinds = [json.loads(line)["kind"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert "decision" not in kinds and "screen" not in kinds
