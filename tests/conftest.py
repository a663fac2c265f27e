from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest_plugins = "pytester"

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
# A copy of ../shared/data (public cap-evolve run on tau2-bench airline); see data/README.md.
SHARED_DATA = Path(__file__).resolve().parent / "data" / "tau2-airline-v4-val-per-task.json"

# End-to-end tests run once in-process and once fanned out over two xdist workers, and must
# agree (pytest-cov's xdist_params).
XDIST_MODES = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-2")]


@pytest.fixture(params=XDIST_MODES)
def xdist_args(request: pytest.FixtureRequest) -> list[str]:
    return list(request.param)


def copy_example(pytester: pytest.Pytester, name: str, dest: str | None = None) -> Path:
    """A private copy of a bundled example (without any run dir) inside pytester's folder."""
    target = pytester.path / (dest or name)
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns(".capevolve", "__pycache__"))
    return target


def edit_spec(project: Path, old: str, new: str) -> None:
    """Replace text in a copied project's spec (the text must be there)."""
    spec = project / "capevolve.yaml"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new))


def add_adapter(project: Path, source: str, ref: str) -> None:
    """Append an adapter subclass to a copied toy_calc project and point its spec at it."""
    with (project / "adapter.py").open("a") as handle:
        handle.write(source)
    edit_spec(project, "adapter.py:ToyCalcAdapter", ref)


def no_test_split(project: Path) -> None:
    """toy_calc with its test share moved to train: a run without a holdout."""
    edit_spec(project, "split_train: 0.25", "split_train: 0.5")
    edit_spec(project, "split_test: 0.25", "split_test: 0.0")


def rollout_records(project: Path) -> dict[tuple[str, str, str, int], dict]:
    """Every persisted rollout of the project's newest run, keyed, with timings dropped."""
    runs = sorted((project / ".capevolve" / "runs").iterdir())
    records = {}
    for path in (runs[-1] / "rollouts").rglob("*.json"):
        record = json.loads(path.read_text())
        record.pop("seconds")
        record.pop("run_id")
        records[(record["split"], record["task_id"], record["tag"], record["trial"])] = record
    return records


def run_dir(project: Path) -> Path:
    return sorted((project / ".capevolve" / "runs").iterdir())[-1]


@pytest.fixture
def shared_data() -> dict:
    if not SHARED_DATA.is_file():
        pytest.fail(f"shared evaluation data missing at {SHARED_DATA}")
    return json.loads(SHARED_DATA.read_text())


from hypothesis import settings  # noqa: E402

# Deterministic, deadline-free property runs: the machines are shared and timing is not a property.
settings.register_profile("capevolve", deadline=None, max_examples=60, derandomize=True, print_blob=True)
# benchmarks/mutation.py runs the fast tests once per mutant: fewer examples keep it to minutes
settings.register_profile("capevolve-mutation", parent=settings.get_profile("capevolve"), max_examples=12)
settings.load_profile("capevolve-mutation" if "MUTANT_UNDER_TEST" in os.environ else "capevolve")
