"""The project's memory moved out of sight, not deleted (issue 25).

``mv .capevolve elsewhere; export CAPEVOLVE_STATE_DIR=/tmp/empty`` hid both copies of what the
project decided and scored — ``.capevolve/decisions.jsonl`` and ``test_seals.jsonl``, and their
copies outside the project — and a new run then gated refuted bytes afresh and scored the
sealed test tasks as a held-out estimate. The project's marker (``capevolve.memory.json``,
beside the spec) names where its memory lives and what it holds: a copy it names is read
wherever ``$CAPEVOLVE_STATE_DIR`` points now, and when no copy in sight holds what it records,
the session refuses in one line naming the marker and both places.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

SIGN = "# Calculator agent\n\nAnswer the arithmetic question with a single integer.\nMind the sign.\n"


def _paid(project: Path, tag: str) -> list[Path]:
    return [p for p in project.glob(".capevolve/runs/*/rollouts/val/*") if f"__{tag}__" in p.name]


@pytest.mark.parametrize("state_dir", ["redirected", "redirected-and-emptied"])
def test_a_moved_capevolve_and_a_redirected_state_dir_decide_and_score_nothing_as_new(
    example, projects, capevolve, monkeypatch, tmp_path, state_dir
):
    project = example("toy_calc")
    projects.edit_spec(project, "base_seed: 0", "base_seed: 0\ngate_alpha_schedule: lord")
    (project / "candidates" / "sign").mkdir()
    (project / "candidates" / "sign" / "prompt.md").write_text(SIGN)
    auto = ["--capevolve-commit", "auto"]
    assert capevolve(project, "sign", gate=True, extra=auto).ret == 10
    # 'careful' (p = 1/64) is refuted at the run's second level, α_2 = 0.0076
    refuted = capevolve(project, "careful", gate=True, extra=auto)
    refuted.stdout.fnmatch_lines(["careful *REJECT*α = 0.007599*"])
    first_run = projects.run_dir(project).name
    assert capevolve(project, finalize=True).ret == 0

    shutil.move(project / ".capevolve", tmp_path / "elsewhere")
    if state_dir == "redirected-and-emptied":
        shutil.move(os.environ["CAPEVOLVE_STATE_DIR"], tmp_path / "state-elsewhere")
    monkeypatch.setenv("CAPEVOLVE_STATE_DIR", str(tmp_path / "empty"))

    assert capevolve(project).ret == 0  # a new run, measuring (not deciding) the seed
    again = capevolve(project, "careful", gate=True, extra=auto)
    said = again.stdout.str() + again.stderr.str()
    # before: a fresh run's first level, α_1 = 0.0304: "careful ACCEPT … booked accept"
    assert "ACCEPT" not in said and "booked accept" not in said, said
    assert not _paid(project, "careful")
    if state_dir == "redirected":  # the marker names the old copy, still there: read
        again.stdout.fnmatch_lines(
            [f"careful *REJECT*byte-identical to 'careful'*rejected*in run {first_run}*"]
        )
    else:  # no copy in sight holds it: refused in one line naming the marker and both places
        again.stderr.fnmatch_lines(
            ["*the project's memory of decisions is out of sight: *capevolve.memory.json records 2 row(s)*"]
        )
        assert str(project / ".capevolve" / "decisions.jsonl") in said and str(tmp_path / "empty") in said

    refused = capevolve(project, finalize=True)
    assert refused.ret != 0
    refused.stderr.fnmatch_lines(["*its test split overlaps test tasks the project already scored*"])
    assert not list(project.glob(".capevolve/runs/*/rollouts/test/*"))  # nothing scored
    labelled = capevolve(project, finalize=True, extra=["--capevolve-test-reused"])
    assert labelled.ret == 0, labelled.stdout.str()
    labelled.stdout.fnmatch_lines(["*test reused — not a held-out estimate*"])
    marker = json.loads((project / "capevolve.memory.json").read_text())  # what it recorded
    assert marker["kinds"]["decisions"]["rows"] >= 2 and marker["kinds"]["test_seals"]["rows"] >= 1
