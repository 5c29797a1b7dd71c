"""A small synthetic run (the results contract, real rules) and its report, built once per session."""

from __future__ import annotations

import pytest

from tests.doubles.synthetic import write_synthetic_run


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("report_run")
    # 4 conditions (one baseline without state) x 3 levels, a few failures, and an HTML probe message
    return write_synthetic_run(
        run_dir, n_sessions=60, max_turns=6, seed=3, baseline=True, html_probe=True, failed_share=0.05, sessions_per_file=25
    )


@pytest.fixture(scope="session")
def small_report(small_run, tmp_path_factory):
    from ray_knowsim.report.build import ReportOptions, build_report

    out = tmp_path_factory.mktemp("report_out")
    first = "synthetic/synth_000/novice/model-a:adaptive/0"  # session 0 carries the HTML probe
    return build_report(small_run.run_dir, out, ReportOptions(sessions=(first,), sample=0)), build_report(
        small_run.run_dir, out / "sampled", ReportOptions(sample=4, seed=1)
    )
