"""What a finished rollout leaves behind (session/retention.py, item_fields.py): slim passed
reports and shed items, with nothing a user sees changed.

Each case runs the same project twice — once as shipped, once with ``-p no:capevolve-retention``
(every report and item kept whole, as pytest keeps them) — and compares what a user sees: the terminal (count
line, ``-rA`` summary with captured output, ``--durations``) and the ``--junitxml`` file. A
conftest records what each process kept at the end, so the cases also fail if nothing is slimmed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from session_outputs import junit_testcases, normalized

# Rollouts of '+' tasks print (captured output on passed reports: -rA shows it); a conftest
# marks q01's items (a user's marker must survive shedding).
PRINTING = """

class PrintingAdapter(ToyCalcAdapter):
    def run_target(self, task, ctx, *, seed):
        if "+" in task.input:
            print(f"adding {task.input}")
        return super().run_target(task, ctx, seed=seed)
"""

CONFTEST = """
import json, os
from pathlib import Path
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "flagged: a user's marker on some rollout items")

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("q01["):
            item.add_marker("flagged")

@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    result = yield  # the terminal summary has been printed
    workerinput = getattr(session.config, "workerinput", None)
    name = workerinput["workerid"] if workerinput else "main"
    stats = session.config.pluginmanager.get_plugin("terminalreporter").stats
    kept = {
        "stats": {key: sorted({type(r).__name__ for r in reports}) for key, reports in stats.items()},
        "fields": sorted({f for item in session.items for f in vars(item) if not item.name.startswith("q01[")}),
        "flagged": [
            [item.get_closest_marker("flagged") is not None, "flagged" in item.keywords]
            for item in session.items if item.name.startswith("q01[")
        ],
        "records_on_items": sum(
            name == "capevolve_rollout" for item in session.items for name, _ in item.user_properties
        ),
    }
    Path(os.environ["KEPT_DIR"], name + ".json").write_text(json.dumps(kept))
    return result
"""


def run_twice(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch, extra: list[str]
) -> dict[str, tuple[pytest.RunResult, Path, dict[str, dict]]]:
    """The same session as shipped ("slim") and with retention off ("full"): each run's
    result, junit file and what each of its processes kept."""
    pytester.makeconftest(CONFTEST)
    runs = {}
    for mode, off in (("slim", []), ("full", ["-p", "no:capevolve-retention"])):
        project = example("toy_calc", dest=mode)
        projects.add_adapter(project, PRINTING, "adapter.py:PrintingAdapter")
        kept_dir = pytester.path / f"kept-{mode}"
        kept_dir.mkdir()
        monkeypatch.setenv("KEPT_DIR", str(kept_dir))
        junit = project / "junit.xml"
        result = capevolve(project, "careful", extra=[*extra, *off, "-rA", f"--junitxml={junit}"])
        assert result.ret == 0, result.stdout.str()
        kept = {p.stem: json.loads(p.read_text()) for p in kept_dir.glob("*.json")}
        runs[mode] = (result, junit, kept)
    return runs


def test_slim_reports_and_shed_items_change_nothing_a_user_sees(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    extra = ["--durations=0", "--durations-min=0", "-o", "junit_logging=all"]
    runs = run_twice(pytester, example, projects, capevolve, monkeypatch, extra)
    (slim, slim_xml, slim_kept), (full, full_xml, full_kept) = runs["slim"], runs["full"]

    # the terminal: the same lines; --durations lists every phase, ordered by a clock
    slim_lines, full_lines = normalized(slim, "slim"), normalized(full, "full")
    start = next(i for i, line in enumerate(full_lines) if "slowest durations" in line)
    end = start + 1 + 24 * 3  # 12 val tasks × 2 tags × setup/call/teardown
    assert sorted(slim_lines[start:end]) == sorted(full_lines[start:end])
    assert slim_lines[:start] + slim_lines[end:] == full_lines[:start] + full_lines[end:]
    outcomes = slim.parseoutcomes()
    assert outcomes == full.parseoutcomes() and (outcomes["passed"], outcomes["failed"]) == (14, 10)
    assert sum(line.startswith("PASSED ") for line in slim_lines) == 14  # -rA lists each
    assert sum("Captured stdout call" in line for line in slim_lines) == 8  # the '+' tasks' output
    assert sum(line.startswith("adding ") for line in slim_lines) == 8
    cases = junit_testcases(slim_xml, "slim")
    assert cases == junit_testcases(full_xml, "full") and len(cases) == 24
    assert sum("adding " in text for _attrs, _props, children in cases for _tag, _a, text in children) == 8

    # what was kept: passed reports slim, items without empty fields or records, markers intact
    main = slim_kept["main"]
    assert set(main["stats"][""]) == set(main["stats"]["passed"]) == {"PassedReport", "PassedReportWith"}
    assert main["stats"]["failed"] == ["TestReport"]  # the summaries print failures: kept whole
    assert main["fields"] == ["key", "location"]  # and pytest's slots: name, parent, _id, ...
    assert main["flagged"] == [[True, True], [True, True]]
    assert main["records_on_items"] == 0
    assert full_kept["main"]["stats"]["passed"] == ["TestReport"]
    assert full_kept["main"]["records_on_items"] == 24


def test_with_xdist_the_controller_and_each_worker_keep_slim_reports_and_the_same_results(
    pytester: pytest.Pytester, example, projects, capevolve, monkeypatch
) -> None:
    runs = run_twice(pytester, example, projects, capevolve, monkeypatch, ["-n", "2"])
    (slim, slim_xml, slim_kept), (full, full_xml, full_kept) = runs["slim"], runs["full"]

    outcomes = slim.parseoutcomes()
    assert outcomes == full.parseoutcomes() and (outcomes["passed"], outcomes["failed"]) == (14, 10)
    slim_lines, full_lines = normalized(slim, "slim"), normalized(full, "full")
    prefixes = ("PASSED ", "FAILED ", "seed ", "careful ", "rollouts: ", "adding ")
    for prefix in prefixes:  # lines compared as sets: the order they arrive in varies
        chosen = sorted(line for line in slim_lines if line.startswith(prefix))
        assert chosen == sorted(line for line in full_lines if line.startswith(prefix)) and chosen
    workers = [sum(line.startswith("[gw") for line in lines) for lines in (slim_lines, full_lines)]
    assert workers[0] == workers[1] >= 8  # -rA names the worker above each captured output
    cases = sorted(junit_testcases(slim_xml, "slim"))
    assert cases == sorted(junit_testcases(full_xml, "full")) and len(cases) == 24

    assert set(slim_kept) == set(full_kept) == {"main", "gw0", "gw1"}
    assert set(slim_kept["main"]["stats"]["passed"]) == {"PassedReportWith"}  # it keeps xdist's node
    for worker in ("gw0", "gw1"):
        kept = slim_kept[worker]
        assert kept["stats"]["passed"] and set(kept["stats"]["passed"]) <= {
            "PassedReport",
            "PassedReportWith",
        }
        assert kept["fields"] == ["key", "location"] and kept["records_on_items"] == 0
        assert full_kept[worker]["stats"]["passed"] == ["TestReport"]
