"""Nothing lost, nothing paid twice: a damaged or edited project or run dir, a swallowed timeout,
odd task ids. Each case names the file and what is wrong; nothing persisted is rewritten."""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_capevolve.cli import main  # noqa: F401  # numpy and scipy load once, here, not in each in-process session


@pytest.mark.parametrize("damage", ["edit", "delete"])
def test_the_best_is_evaluated_from_its_snapshot_whatever_happens_to_its_folder(
    example, projects, capevolve, damage
) -> None:
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True, extra=["--capevolve-null", "0"]).ret == 0
    careful = project / "candidates" / "careful"
    if damage == "edit":
        (careful / "prompt.md").write_text("something else entirely\n")
    else:
        shutil.rmtree(careful)
    result = capevolve(project)  # evaluates the best: careful, from its snapshot
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["careful *val *12 *0.833*", "rollouts: 0 paid, 12 reused*"])
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["best_id"] == "careful"
