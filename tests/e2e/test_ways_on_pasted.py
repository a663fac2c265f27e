"""Ways on pasted back (issue 38, the traps left by the last session): each refusal's command is run
as printed, and does what the refusal says it does."""

from __future__ import annotations

import json
import shlex

from cli_calls import run
from fix_list_project import fixing, make_fix_list, split_ids


def _pasted(text: str, after: str) -> list[str]:
    """The ``pytest …`` command printed after ``after`` in ``text`` (up to the line's end), as arguments."""
    command = shlex.split(text.split(after, 1)[1].splitlines()[0])
    assert command[0] == "pytest", command
    return command[1:]


def test_an_accept_with_no_verdict_names_the_gate_command_that_books_it(
    example, projects, capevolve, capsys, pytester
):
    project = make_fix_list(example, projects)
    assert capevolve(project).ret == 0
    fixing(project, "big", split_ids(project, "val")[:5])
    assert capevolve(project, "big").ret == 0  # evaluated, not gated: no verdict

    code, _, err = run(capsys, "commit", "big", str(project), "--decision", "accept")

    # before: "Gate it: capevolve pytest --capevolve-run fixes --capevolve-candidate DIR --capevolve-gate"
    assert code != 0 and "there is no verdict. Gate it: pytest " in err, err
    gated = pytester.runpytest(*_pasted(err, "Gate it: "))
    assert gated.ret == 0, gated.stdout.str()[-3000:]
    assert json.loads((projects.run_dir(project) / "state.json").read_text())["best_id"] == "big"
