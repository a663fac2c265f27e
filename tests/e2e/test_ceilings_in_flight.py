"""max_usd is a ceiling under concurrency: each process reserves a rollout's cost before
starting it, so a session ends at most one rollout per process above the cap, however many
rollouts it keeps in flight (issue 26, item 3). max_metric_calls is exact before paying
(tests/e2e/test_ceilings.py): a plan owes a known number of rollouts."""

from __future__ import annotations

import json

import pytest
from run_log import rollout_files

PRICEY = '''

class PriceyAdapter(ToyCalcAdapter):
    """A rollout costs $0.001, or ten times that for a prompt that says "expensive"."""

    def run_target(self, task, ctx, *, seed):
        rollout = super().run_target(task, ctx, seed=seed)
        pricey = "expensive" in (Path(ctx) / "prompt.md").read_text()
        rollout.cost_usd = 0.01 if pricey else 0.001
        return rollout
'''
CAP = 0.15  # the seed's 60 rollouts cost $0.06; the candidate's 60 at the seed's rate, $0.06 more
ONE_ROLLOUT = 0.01  # the candidate's, ten times the rate measured


def _pricey_project(example, projects):
    project = example("toy_calc")
    projects.add_adapter(project, PRICEY, "adapter.py:PriceyAdapter")
    projects.edit_spec(project, "num_trials: 1", f"num_trials: 5\nmax_usd: {CAP}")
    pricey = project / "candidates" / "pricey"
    pricey.mkdir()
    (pricey / "prompt.md").write_text((project / "capability" / "prompt.md").read_text() + "Be expensive.\n")
    return project


@pytest.fixture
def pricey_baseline(built, example, projects, capevolve):
    """The pricey project after the seed's session (60 rollouts at $0.001, the rate measured):
    built once per process (``built`` in tests/conftest.py), a copy for each test."""

    def make():
        project = _pricey_project(example, projects)
        assert capevolve(project).ret == 0
        return project, None

    return built("toy-calc-pricey-baseline", "toy_calc", make)[0]


@pytest.mark.attack(
    "inputs",
    attack=(
        "a candidate ten times dearer than the rate its session was checked at (under `-n 2 "
        "--capevolve-concurrency 8` a $0.15 `max_usd` ended at $0.53, before)"
    ),
    outcome=(
        "at most one rollout per process above the cap: each reserves a rollout's cost before starting it"
    ),
)
@pytest.mark.parametrize(
    "workers", [pytest.param([], id="one-process"), pytest.param(["-n", "2"], id="xdist-2")]
)
def test_a_ten_times_dearer_candidate_ends_within_one_rollout_per_worker_of_max_usd(
    pricey_baseline, projects, capevolve, workers
) -> None:
    project = pricey_baseline  # the seed: 60 rollouts at $0.001, the rate measured
    state = json.loads((projects.run_dir(project) / "state.json").read_text())
    assert state["spent"]["usd"] == pytest.approx(0.06)
    result = capevolve(project, "pricey", extra=[*workers, "--capevolve-concurrency", "8"])
    spent = json.loads((projects.run_dir(project) / "state.json").read_text())["spent"]
    processes = 2 if workers else 1
    assert spent["usd"] <= CAP + processes * ONE_ROLLOUT + 1e-9, (spent, result.outlines[-30:])
    assert spent["usd"] >= CAP - processes * ONE_ROLLOUT - 1e-9  # it paid up to the cap, not nothing
    result.stdout.fnmatch_lines(["*rollouts not started: they would cross max_usd*"])


def test_max_metric_calls_is_never_crossed_under_xdist_and_concurrency(example, projects, capevolve) -> None:
    """The count ceiling at -n 2 and eight in flight: a plan owes a known number of rollouts,
    so a session that would cross it pays none (not one per worker too many)."""
    project = _pricey_project(example, projects)
    projects.edit_spec(project, f"max_usd: {CAP}", "max_usd: 10.0\nmax_metric_calls: 100")
    assert capevolve(project).ret == 0  # the seed's 60
    result = capevolve(project, "pricey", extra=["-n", "2", "--capevolve-concurrency", "8"])
    assert result.ret == 4, result.outlines[-20:]
    result.stderr.fnmatch_lines(["*60 + 60 rollouts > max_metric_calls=100*"])
    spent = json.loads((projects.run_dir(project) / "state.json").read_text())["spent"]
    assert spent["metric_calls"] == 60
    assert not rollout_files(projects.run_dir(project), "pricey")


def test_finalize_under_max_usd_prices_the_test_split_from_val(pricey_baseline, projects, capevolve) -> None:
    """A spec with ``max_usd`` could not be finalized at all: pricing the test rollouts read the
    test split outside the seal (a TestSealError naming the very command being run). And when
    the cap leaves no room, the refusal says how to go on, not "or finalize"."""
    project = pricey_baseline  # the seed's val: $0.06 of the $0.15
    projects.edit_spec(project, f"max_usd: {CAP}", "max_usd: 0.07")
    refused = capevolve(project, finalize=True)
    assert refused.ret == 4, refused.outlines[-10:]
    refused.stderr.fnmatch_lines(
        ["*would cross a ceiling*raise the ceiling in the spec*then finalize again*"]
    )
    assert "TestSealError" not in refused.stderr.str() + refused.stdout.str()
    projects.edit_spec(project, "max_usd: 0.07", f"max_usd: {CAP}")
    sealed = capevolve(project, finalize=True)
    assert sealed.ret == 0, sealed.outlines[-20:]
    assert (projects.run_dir(project) / "seal.json").is_file()
