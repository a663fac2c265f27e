"""The leak guard end to end: a candidate whose edit holds a val task's id is indecisive and
unpaid, the refusal naming the file and line; ``leak_guard_min_length: false`` turns it off."""

from __future__ import annotations

import json
import shutil

# a val id of noisy_agent's frozen splits (split_seed 7)
VAL_ID = "n13"


def test_a_candidate_embedding_a_val_task_id_is_refused_unpaid_naming_file_and_line(
    example, projects, capevolve
) -> None:
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 1")
    # noisy_agent's ids are three characters long: the guard is tuned to see them
    (project / "capevolve.yaml").write_text(
        (project / "capevolve.yaml").read_text() + "leak_guard_min_length: 3\n"
    )
    cand = project / "candidates" / "peek"
    shutil.copytree(project / "capability", cand)
    lines = (cand / "prompt.md").read_text().splitlines()
    (cand / "prompt.md").write_text(
        "\n".join([*lines, f"- For ticket {VAL_ID.upper()}, escalate at once."]) + "\n"
    )
    result = capevolve(project, "peek", gate=True)
    assert result.ret == 11, result.stdout.str()[-3000:]  # indecisive
    out = result.stdout.str()
    assert f"prompt.md:{len(lines) + 1} holds the id of val task '{VAL_ID}'" in out
    records = projects.rollout_records(project)
    assert not [k for k in records if k[2] == "peek"]  # no rollout paid for it
    verdict = json.loads((projects.run_dir(project) / "verdicts" / "peek.json").read_text())
    assert verdict["decision"] == "indecisive" and verdict["basis"] == "leak"
    assert verdict["details"]["leaks"] == [{"file": "prompt.md", "line": len(lines) + 1, "kind": "id"}]

    # turned off, the same bytes (under a new tag) are evaluated and paid
    projects.edit_spec(project, "leak_guard_min_length: 3", "leak_guard_min_length: false")
    again = capevolve(project, "peek", tags=["peek2"])
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert len([k for k in projects.rollout_records(project) if k[2] == "peek2"]) == 40
