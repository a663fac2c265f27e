"""dashboard.html: the builder on a hand-made run dir (fast), and a real session's page loaded in
headless Chromium (no console errors, the plots' element counts, hostile feedback stays text)."""

from __future__ import annotations

import base64
import hashlib

import pytest
from dashboard_run import HOSTILE, HOSTILE_ID, Elements, hand_made_run

from pytest_capevolve._cli.main import main
from pytest_capevolve._show.dashboard import build
from pytest_capevolve._show.dashboard.page import SCRIPT
from pytest_capevolve._show.dashboard.plots import decision_class, esc, reward_colour


@pytest.fixture
def page(tmp_path, val_rollout) -> str:
    return build(hand_made_run(tmp_path, val_rollout), num_trials=2)


def test_heatmap_has_a_cell_per_task_and_tag_and_missing_is_not_zero(page):
    doc = Elements(page)
    cells = doc.having("rect", "cell")
    assert len(cells) == 3 * 2  # tasks × tags with val rollouts (seed, cand)
    states = sorted(attrs["class"] for attrs in cells)
    assert states == [
        "cell infra",
        "cell missing",
        "cell scored",
        "cell scored",
        "cell scored",
        "cell scored",
    ]
    zero = [a for a in doc.having("rect", "cell", "scored") if a["fill"] == reward_colour(0.0)]
    assert len(zero) == 1  # cand on t1: a real 0
    assert doc.having("rect", "cell", "missing")[0]["fill"] == "url(#hatch-missing)" != reward_colour(0.0)
    assert doc.having("rect", "cell", "infra")[0]["fill"] == "url(#hatch-infra)"
    # every cell links to its task's drill-down, by index: no task id in an attribute
    links = [attrs["href"] for name, attrs in doc.tags if name == "a"]
    assert sorted(set(links)) == ["#task-0", "#task-1", "#task-2"]
    assert {attrs["id"] for attrs in doc.having("details", "task")} == {"task-0", "task-1", "task-2"}


def test_one_forest_row_per_verdict_with_the_null_band(page):
    doc = Elements(page)
    rows = doc.having("g", "forest-row")
    assert len(rows) == 3
    assert len(doc.having("g", "forest-row", "null")) == 1
    assert len(doc.having("circle", "delta")) == 2  # the refused verdict has no Δ̄ to draw
    band = doc.having("rect", "null-band")
    assert len(band) == 1 and float(band[0]["width"]) > 0
    assert "decided before any rollout (micro_test_fail)" in "".join(doc.text)


def test_a_verdict_row_shows_and_is_coloured_by_the_decision_booked_on_it(tmp_path, val_rollout):
    """The forest plot follows the booking, not the verdict alone: a reject verdict booked
    provisional (or accepted with --force) is drawn so, never as a red REJECT."""
    rundir = hand_made_run(tmp_path, val_rollout)
    before = Elements(build(rundir, num_trials=2))
    assert len(before.having("text", "decision", "reject")) == 2  # the null and the refused one
    rundir.log.append_event("decision", tag="refused", parent="seed", decision="provisional", basis=None)
    after = Elements(build(rundir, num_trials=2))
    assert len(after.having("text", "decision", "reject")) == 1
    assert len(after.having("text", "decision", "provisional")) == 1
    assert "PROVISIONAL" in "".join(after.text)


def test_a_label_beside_a_decision_keeps_its_greek(tmp_path, val_rollout):
    """Issue 38, trap 1: the decision is written in capitals, and an adopted label beside it was
    too ("AT Α = 0.05", a capital alpha); the label is written as booked."""
    rundir = hand_made_run(tmp_path, val_rollout)
    label = "adopted: accepted against the same bytes as 'seed' in run r0 at α = 0.05, not gated again"
    rundir.log.append_event("decision", tag="cand", parent="seed", decision="accept", basis=None, label=label)
    page = build(rundir, num_trials=2)
    assert "ACCEPT (adopted: accepted" in page and "at α = 0.05" in page and "Α" not in page


def test_a_candidate_a_screen_killed_gets_a_forest_row_without_a_verdict_file(tmp_path, val_rollout):
    rundir = hand_made_run(tmp_path, val_rollout)
    kill = {"against": "seed", "screen": "tier1", "tasks": 6, "basis": "harm", "fired": 12}
    rundir.log.append_event("screen", tag="bad", decision="kill", delta_mean=-0.3, p_harm=0.01, **kill)
    rundir.log.append_event("screen", tag="meh", decision="promote", delta_mean=0.0, p_harm=0.5, **kill)
    doc = Elements(build(rundir, num_trials=2))
    assert len(doc.having("g", "forest-row")) == 4  # the three verdicts and the kill, not the promote
    assert len(doc.having("g", "forest-row", "decision-reject")) == 3
    text = "".join(doc.text)
    assert "bad" in text and "meh" not in text and "-0.3000 — p=0.01 n=6" in text


def test_best_so_far_follows_the_run(page):
    doc = Elements(page)
    assert len(doc.having("circle", "best-point")) == 2  # iteration 0 (seed) and 1 (cand accepted)
    assert len(doc.having("circle", "candidate-point", "decision-accept")) == 1


def test_hostile_text_stays_text(page):
    doc = Elements(page)
    assert doc.scripts == [SCRIPT]  # one script: the page's own, carrying no data
    assert not doc.having("img") and not [attrs for _, attrs in doc.tags if attrs.get("id") == "x"]
    assert not [a for _, attrs in doc.tags for a in attrs if a.startswith("on")]
    text = "".join(doc.text)
    assert text.count(HOSTILE) >= 4  # feedback, output, infra error, a reason (and the note)
    assert HOSTILE_ID in text


def test_text_is_escaped_for_elements_and_attributes_alike():
    assert (
        esc("<a href=\"x\" title='y'>&</a>")
        == "&lt;a href=&quot;x&quot; title=&#x27;y&#x27;&gt;&amp;&lt;/a&gt;"
    )
    assert decision_class(HOSTILE) == "other" and decision_class("accept") == "accept"


def test_page_is_offline_deterministic_and_pins_its_script(tmp_path, val_rollout):
    rundir = hand_made_run(tmp_path, val_rollout)
    page = build(rundir, num_trials=2)
    assert page == build(rundir, num_trials=2)
    doc = Elements(page)
    # nothing to fetch: links stay in the page, no src, no stylesheet or font from elsewhere
    assert all(attrs["href"].startswith("#") for _, attrs in doc.tags if "href" in attrs)
    assert not [attrs for _, attrs in doc.tags if "src" in attrs] and not doc.having("link")
    assert "@import" not in page and "@font-face" not in page and "url(http" not in page
    csp = doc.having("meta")[1]["content"]
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert "default-src 'none'" in csp and f"script-src 'sha256-{digest}'" in csp


def test_capevolve_dashboard_needs_a_run(example, capsys):
    project = example("toy_calc")
    assert main(["dashboard", str(project)]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no run under")


def test_ci_installs_chromium_and_runs_the_readme_test_command(repo):
    recipe = (repo / ".ci" / "run").read_text().strip().splitlines()
    assert "command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)" in recipe
    assert recipe[-1] in (repo / "README.md").read_text()  # exactly the README's test command
