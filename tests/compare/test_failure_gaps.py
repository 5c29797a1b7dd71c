"""compare's failure rates: counts per condition and level (classes from the rows, or from their
errors for rows written before the column), and the warning rule — Fisher's exact test and a
5-point floor — on pairs whose rates differ, and not on pairs whose rates agree."""

from __future__ import annotations

import pandas as pd
import pytest

from ray_knowsim.compare.failures import failure_counts, failure_gaps, gap_warnings


def outcomes(spec: dict[tuple[str, str], tuple[int, int, str]]) -> pd.DataFrame:
    """(level, condition) -> (sessions, failed, error of the failed ones)."""
    rows = []
    for (level, cond), (n, failed, error) in spec.items():
        for k in range(n):
            bad = k < failed
            rows.append({"task": "math", "knowledge_level": level, "condition": cond, "status": "failed" if bad else "ok",
                         "failure_class": None, "error": error if bad else None})
    return pd.DataFrame(rows)


def test_counts_per_level_and_class_and_the_level_marginal():
    df = outcomes({("novice", "a"): (20, 8, "assistant_truncated"), ("novice", "b"): (20, 1, "assistant_http_503"),
                   ("advanced", "a"): (20, 0, ""), ("advanced", "b"): (20, 0, "")})
    counts = failure_counts(df).set_index(["knowledge_level", "condition"])
    assert counts.loc[("novice", "a"), "n_failed_model"] == 8 and counts.loc[("novice", "b"), "n_failed_infra"] == 1
    assert counts.loc[("novice", "a"), "failure_rate"] == pytest.approx(0.4)
    assert counts.loc[("all", "a"), "n_sessions"] == 40 and counts.loc[("all", "a"), "n_failed"] == 8


def test_a_verbose_tutor_truncating_more_often_is_warned_about():
    df = outcomes({("novice", "verbose"): (30, 12, "assistant_truncated"), ("novice", "terse"): (30, 1, "assistant_truncated")})
    gaps = failure_gaps(failure_counts(df), ["verbose", "terse"])
    row = gaps[gaps["knowledge_level"] == "novice"].iloc[0]
    assert row["biased"] and row["p_fisher"] < 0.01 and row["diff"] == pytest.approx(11 / 30)
    lines = gap_warnings(gaps)
    assert any("math/novice: verbose fails 40% of 30 sessions, terse 3% of 30" in line for line in lines)


@pytest.mark.parametrize("a,b", [((30, 3), (30, 2)),  # close rates: no warning
                                 ((4, 2), (4, 0))])  # a big gap on too few sessions to tell: no warning
def test_rates_that_do_not_differ_measurably_are_not_warned_about(a, b):
    df = outcomes({("novice", "x"): (*a, "assistant_empty"), ("novice", "y"): (*b, "assistant_empty")})
    gaps = failure_gaps(failure_counts(df), ["x", "y"])
    assert not gaps["biased"].any() and gap_warnings(gaps) == []
