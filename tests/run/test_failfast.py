"""engine.fail_fast's decision (run/fail_fast.py), without Ray: one error code over and over
stops a run; spread or occasional failures never do."""

from __future__ import annotations

import pytest

from ray_knowsim.config.sections import EngineConfig, FailFastConfig
from ray_knowsim.run.fail_fast import FailureGuard


def test_one_error_code_with_the_share_after_enough_sessions_stops():
    guard = FailureGuard(FailFastConfig())  # the default: 90% of at least 20
    assert guard.check(19, {"assistant_http_404": 19}) is None  # too few finished yet
    stop = guard.check(20, {"assistant_http_404": 18, "user_sim_timeout": 1})
    assert stop is not None and (stop.error, stop.failed, stop.finished) == ("assistant_http_404", 18, 20)
    assert stop.line() == "18 of 20 finished sessions failed with assistant_http_404 (engine.fail_fast: share 0.9 after 20 sessions)"


def test_spread_or_occasional_failures_never_stop():
    guard = FailureGuard(FailFastConfig())
    assert guard.check(100, {"a_http_500": 45, "b_http_500": 45}) is None  # 90% failed, but no one code has 90%
    assert guard.check(1000, {"assistant_invalid_output": 80}) is None
    assert FailureGuard(None).check(1000, {"x_timeout": 1000}) is None  # fail_fast: null


def test_a_count_rule_and_counts_carried_across_condition_groups():
    guard = FailureGuard(FailFastConfig(share=None, count=30))
    assert guard.check(25, {"extractor_http_400": 25}) is None
    guard.absorb(25, {"extractor_http_400": 25})  # the first group ended
    stop = guard.check(5, {"extractor_http_400": 5})
    assert stop is not None and (stop.failed, stop.finished) == (30, 30) and "count 30" in stop.rule


def test_the_config_defaults_on_and_refuses_an_empty_rule():
    assert EngineConfig().fail_fast == FailFastConfig(min_finished=20, share=0.9, count=None)
    assert EngineConfig(fail_fast=None).fail_fast is None
    with pytest.raises(ValueError, match="set share or count"):
        FailFastConfig(share=None)
