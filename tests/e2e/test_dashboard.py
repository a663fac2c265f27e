"""dashboard.html: the builder on a hand-made run dir (fast), and a real session's page loaded in
headless Chromium (no console errors, the plots' element counts, hostile feedback stays text)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from dashboard_run import HOSTILE, Elements, hand_made_run

from pytest_capevolve._cli.main import main
from pytest_capevolve._show.dashboard import build
from pytest_capevolve._show.dashboard.page import SCRIPT


@pytest.fixture
def page(tmp_path, val_rollout) -> str:
    return build(hand_made_run(tmp_path, val_rollout), num_trials=2)


# -- the real thing: a gate session's page in headless Chromium ---------------------------------


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = (
        "headless Chromium not found; install it to run the dashboard's browser test "
        "(Debian/Ubuntu: apt-get install -y chromium)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def load(browser: str, profile: Path, url: str, *mode: str) -> subprocess.CompletedProcess[str]:
    """One headless page load; console messages (errors, CSP refusals) go to stderr."""
    args = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *mode,
        url,
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def console_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


def test_dashboard_of_a_gate_session_in_headless_chromium(example, projects, capevolve, tmp_path, capsys):
    browser = chromium()
    project = example("noisy_agent")
    projects.edit_spec(project, "num_trials: 5", "num_trials: 2")  # the page draws alike at any n
    adapter = project / "adapter.py"
    scoring = "        return Score(reward=1.0 if ok else 0.0, feedback=feedback)"
    assert scoring in adapter.read_text()
    adapter.write_text(
        adapter.read_text().replace(
            scoring,
            f"        if task.id == 'n01':\n            feedback += {HOSTILE!r}\n{scoring}",
        )
    )
    # improved is accepted, copy re-gated against it and rejected, regressed refused by a
    # microcase before any rollout: real verdicts, two nulls, three decisions; in process (the
    # controller draws the page, under xdist too: tests/e2e/test_views.py)
    result = capevolve(project, "improved", "copy", "regressed", gate=True)
    assert result.ret == 10, result.stdout.str()
    rundir = projects.run_dir(project)
    written = (rundir / "dashboard.html").read_text()
    verdicts = sorted(p.stem for p in (rundir / "verdicts").glob("*.json"))
    assert verdicts == ["copy", "improved", "regressed", "seed-null1", "seed-null2"]

    (rundir / "dashboard.html").unlink()
    capsys.readouterr()
    assert main(["dashboard", str(project), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "dashboard": str(rundir / "dashboard.html"),
        "run_id": rundir.name,
    }
    assert (rundir / "dashboard.html").read_text() == written  # the command rebuilds the same page

    url = (rundir / "dashboard.html").as_uri()
    screenshot = tmp_path / "dashboard.png"
    # one load draws the screenshot and dumps the DOM (a Chromium start costs a CPU-second)
    dumped = load(
        browser,
        tmp_path / "profile",
        url,
        f"--screenshot={screenshot}",
        "--window-size=1400,2000",
        "--dump-dom",
    )
    assert console_lines(dumped) == []  # no error, no CSP refusal
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(screenshot.read_bytes()[16:20], "big") == 1400

    dom = Elements(dumped.stdout)
    tags = ["seed", "improved", "copy", "seed-null1", "seed-null2"]  # regressed paid no rollout
    assert len(dom.having("rect", "cell")) == 40 * len(tags)
    assert len(dom.having("g", "forest-row")) == len(verdicts)
    assert len(dom.having("g", "forest-row", "null")) == 2
    assert len(dom.having("rect", "null-band")) == 1
    assert len(dom.having("circle", "best-point")) == 1 + 3  # the seed, then three decisions
    assert len(dom.having("details", "task")) == 40

    # hostile feedback is text: one script (the page's own), nothing ran, no element made of it
    assert dom.scripts == [SCRIPT]
    body = next(attrs for name, attrs in dom.tags if name == "body")
    assert "data-pwned" not in body
    assert not dom.having("img")
    assert "".join(dom.text).count(HOSTILE.strip()) >= 1

    # the drill-down: a cell's link opens its task's trials (the page's one script, under its CSP)
    opened = load(browser, tmp_path / "profile", url + "#task-0", "--dump-dom")
    assert console_lines(opened) == []
    assert "open" in Elements(opened.stdout).having("details", "task")[0]


def test_finalize_refreshes_the_dashboard_with_the_sealed_score(
    example, projects, capevolve, monkeypatch, capsys
):
    project = example("toy_calc")
    assert capevolve(project, "careful", gate=True).ret == 0
    page = (projects.run_dir(project) / "dashboard.html").read_text()
    assert "sealed: not finalized yet" in page
    assert capevolve(project, finalize=True).ret == 0
    doc = Elements((projects.run_dir(project) / "dashboard.html").read_text())
    rows = [r for r in doc.text if r.startswith("seal.json")]
    assert rows  # the measure table's test rows now come from the seal
    assert "sealed: not finalized yet" not in "".join(doc.text)

    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    capsys.readouterr()
    assert main(["dashboard", str(project), "--open"]) == 0
    page = projects.run_dir(project) / "dashboard.html"
    assert capsys.readouterr().out == f"dashboard: {page}\n"
    assert opened == [page.resolve().as_uri()]
