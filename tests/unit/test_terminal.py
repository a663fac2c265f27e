"""The terminal of a capevolve session: one line per failed rollout, the progress line, Ctrl-C's
resume command and --capevolve-explain."""

from __future__ import annotations

import shlex


def test_resume_command_pins_the_run_and_names_a_reruns_fresh_tags(tmp_path) -> None:
    from pytest_capevolve._session.selection import resume_command

    typed = ["--capevolve-run", "p", "--capevolve-new-run", "--capevolve-run-id=old", "-n", "2"]
    assert resume_command(typed, "r1") == "pytest --capevolve-run p -n 2 --capevolve-run-id r1"
    rerun = [
        "--capevolve-run",
        "p",
        "--capevolve-candidate",
        "c/improved",
        "--capevolve-tag",
        "x",
        "--capevolve-rerun",
    ]
    folder = tmp_path / "a b"
    assert shlex.split(resume_command(rerun, "r1", rerun_candidates=[("x-r2", folder)])) == [
        "pytest",
        "--capevolve-run",
        "p",
        "--capevolve-candidate",
        str(folder),
        "--capevolve-tag",
        "x-r2",
        "--capevolve-run-id",
        "r1",
    ]
    # without --capevolve-rerun the candidates typed are the ones to resume
    assert "--capevolve-tag x " in resume_command(rerun[:-1], "r1", rerun_candidates=[("x-r2", folder)]) + " "


def test_plan_figures_mde_and_tasks_needed_agree() -> None:
    """The tasks a change of size MDE needs are the tasks the MDE was computed at; more noise
    or a smaller effect needs more tasks."""
    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from pytest_capevolve._show.explain import plan_figures

    @given(st.integers(2, 200), st.floats(0.02, 0.5), st.integers(0, 10_000))
    def check(n: int, noise: float, seed: int) -> None:
        rng = np.random.default_rng(seed)
        best = rng.random((n, 3)).round(1)
        null = np.clip(best + rng.normal(0, noise, (n, 3)), 0, 1)
        figures = plan_figures(best, [null], num_trials=3, alpha=0.05)
        assert figures is not None and figures.n == n and figures.source == "1 null control(s)"
        if figures.sd == 0:
            return
        assert figures.tasks_for(figures.mde) in (max(2, n), n + 1)  # ceil of n, up to rounding
        assert figures.tasks_for(figures.mde / 2) >= 4 * n - 1
        assert figures.tasks_for(0.0) is None and figures.tasks_for(-0.1) is None

    check()
    assert plan_figures(np.full((1, 3), 0.5), [], num_trials=3, alpha=0.05) is None  # one task: no plan


def test_the_completing_command_drops_node_ids_and_what_stops_at_a_failed_rollout() -> None:
    """After -x (or a node id, --lf, --sw) left rollouts missing, the command that completes
    them must not stop or select again; a resume after Ctrl-C keeps what was typed."""
    from pytest_capevolve._session.selection import resume_command

    typed = [
        "--capevolve-run",
        "p",
        "-xq",
        "--maxfail=2",
        "--maxfail",
        "3",
        "-x",
        "--sw",
        "--ff",
        "p/capevolve.yaml::val::q05[seed-t0]",
        "-rA",
    ]
    complete = shlex.split(resume_command(typed, "r1", complete=True))
    assert complete == ["pytest", "--capevolve-run", "p", "-q", "-rA", "--capevolve-run-id", "r1"]
    assert shlex.split(resume_command(typed, "r1"))[1:-2] == typed  # Ctrl-C: the same selection
