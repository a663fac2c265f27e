"""Red-team replays against issue 37's boundary, each on a fresh ``capevolve init`` project kept
in a temporary folder, the optimizer's steps inside ``capevolve agent --``: what the broker, which
runs commands outside the boundary with the evaluator's rights, must never be led to do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from docs_commands import environment

from pytest_capevolve._cli.main import main
from pytest_capevolve._confine.landlock import abi

needs_landlock = pytest.mark.skipif(
    abi() < 6 and not os.environ.get("CI"),
    reason="this kernel offers no Landlock with scoping (ABI >= 6); CI's machines do, and there this fails",
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "above" / "project"
    folder.parent.mkdir()
    assert main(["init", str(folder)]) == 0
    return folder


def agent(project: Path, script: str, *, landlock: bool = True) -> subprocess.CompletedProcess[str]:
    env = environment()
    if not landlock:
        env["CAPEVOLVE_LANDLOCK"] = "off"
    return subprocess.run(
        ["capevolve", "agent", "--", "sh", "-c", script],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


AT_FILE = """
mkdir -p "$TMPDIR/evil"
printf 'import pathlib\\npathlib.Path("%s").write_text("outside")\\n' "$MARKER" > "$TMPDIR/evil/conftest.py"
printf '%s\\n' "$TMPDIR/evil" > "$TMPDIR/args.txt"
capevolve pytest "@$TMPDIR/args.txt" -q -p no:cacheprovider
capevolve pytest --capevolve-run . -k "@$TMPDIR/args.txt" -q -p no:cacheprovider
"""


@needs_landlock
@pytest.mark.confined
def test_a_pytest_argument_file_cannot_lead_the_broker_to_import_the_agents_conftest(project: Path) -> None:
    """``capevolve pytest @FILE``: the broker took ``@FILE`` for a path in the project, and pytest
    read the agent's arguments from FILE — a folder in the agent's TMPDIR whose conftest.py then
    ran in the broker's unconfined session and wrote ``.capevolve/`` (any event, any file)."""
    marker = project / ".capevolve" / "PLANTED"
    done = agent(project, f"MARKER={marker}\n{AT_FILE}")
    assert not marker.exists(), done.stderr
    assert done.stderr.count("read more arguments") == 2, done.stderr
