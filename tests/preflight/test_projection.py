"""The run's cost re-estimated from its committed sessions (preflight/projection.py), on hand-made
spends whose projections are computed here by hand."""

from __future__ import annotations

import pytest

from ray_knowsim.preflight.estimate import Estimate, RoleEstimate, Totals
from ray_knowsim.preflight.projection import (OVERRUN, Progress, Tokens, UnitSpend, changed, first_after, line, project,
                                              warning_line)
from ray_knowsim.schema.price import NO_PRICE, Price

#: $1 per million prompt tokens, $0.50 cached, $2 written, $4 completion
PRICE = Price(input=1.0, cached_input=0.5, cache_write=2.0, output=4.0)


def role(prompt: int, completion: int, cost: float | None, *models: str) -> RoleEstimate:
    return RoleEstimate(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost, models=list(models))


def first_estimate(per_role: dict[str, RoleEstimate], n: int = 100) -> Estimate:
    costs = [e.cost_usd for e in per_role.values()]
    totals = Totals(prompt_tokens=sum(e.prompt_tokens for e in per_role.values()),
                    completion_tokens=sum(e.completion_tokens for e in per_role.values()),
                    cost_usd=None if None in costs else sum(costs))
    return Estimate(name="t", config_hash="h", n_sessions=n, turns={}, totals=totals, per_role=per_role, per_condition={},
                    upper_bound=Totals(), first_turn={}, assumptions={})


def spend(role_: str, model: str, **tokens: float) -> UnitSpend:
    return UnitSpend(role=role_, model=model, tokens=Tokens(**tokens))


FIRST = first_estimate({
    "user_sim": role(1_000_000, 100_000, 1.4, "m"),  # 1e6 * 1 + 1e5 * 4 = $1.40
    "assistant": role(2_000_000, 500_000, 4.0, "a", "b"),
    "judge": role(300_000, 50_000, 0.5, "m"),
})
PRICES = {"m": PRICE, "a": PRICE, "b": PRICE}


def test_each_role_is_its_committed_sessions_mean_times_the_planned_sessions():
    # 10 of 100 sessions committed; assistant "a" tutors 60 planned sessions (6 committed), "b" 40 (4 committed)
    progress = Progress(committed=10, planned=100, committed_by_assistant={"a": 6, "b": 4},
                        planned_by_assistant={"a": 60, "b": 40}, spent=[
                            spend("user_sim", "m", prompt_tokens=150_000, cached_prompt_tokens=50_000, completion_tokens=20_000),
                            spend("assistant", "a", prompt_tokens=120_000, completion_tokens=30_000, cache_write_tokens=20_000),
                            spend("assistant", "b", prompt_tokens=40_000, completion_tokens=10_000, reasoning_tokens=4_000)])
    p = project(FIRST, progress, PRICES)
    user = p.per_role["user_sim"]
    # x10: 1.5e6 prompt (5e5 cached), 2e5 completion -> (1e6 * 1 + 5e5 * 0.5 + 2e5 * 4) / 1e6
    assert user.projected == Tokens(prompt_tokens=1_500_000, cached_prompt_tokens=500_000, completion_tokens=200_000)
    assert user.projected_usd == pytest.approx(2.05)
    assert user.so_far_usd == pytest.approx((100_000 * 1 + 50_000 * 0.5 + 20_000 * 4) / 1e6)
    # per model: "a" x10 (60/6), "b" x10 (40/4)
    a_usd = (1_000_000 * 1 + 200_000 * 2 + 300_000 * 4) / 1e6
    b_usd = (400_000 * 1 + 100_000 * 4) / 1e6
    assistant = p.per_role["assistant"]
    assert assistant.projected.prompt_tokens == 1_600_000 and assistant.projected.reasoning_tokens == 40_000
    assert assistant.projected_usd == pytest.approx(a_usd + b_usd)
    # the judge is not called before the scoring stage: its first estimate stands
    assert not p.per_role["judge"].measured and p.per_role["judge"].projected_usd == 0.5
    assert p.unit == "usd"
    assert p.projected_usd == pytest.approx(2.05 + a_usd + b_usd + 0.5)
    assert p.first_usd == pytest.approx(5.9)
    assert p.ratio == pytest.approx((2.05 + a_usd + b_usd + 0.5) / 5.9)
    assert p.projected_tokens == 1_700_000 + 2_000_000 + 350_000
    assert p.so_far_tokens == 170_000 + 150_000 + 50_000


def test_sessions_not_calls_scale_and_a_model_not_yet_measured_keeps_its_share_of_the_first_estimate():
    # "b" has no committed session yet: 40 % of the assistant's first estimate (2e6 / 5e5 tokens, $4)
    progress = Progress(committed=5, planned=100, committed_by_assistant={"a": 5}, planned_by_assistant={"a": 60, "b": 40},
                        spent=[spend("assistant", "a", prompt_tokens=100_000, completion_tokens=25_000)])
    p = project(FIRST, progress, PRICES)
    assistant = p.per_role["assistant"]
    assert assistant.projected.prompt_tokens == pytest.approx(1_200_000 + 800_000)
    assert assistant.projected.completion_tokens == pytest.approx(300_000 + 200_000)
    assert assistant.projected_usd == pytest.approx((1_200_000 + 300_000 * 4) / 1e6 + 4.0 * 0.4)
    # a role the sessions did not call stays as first estimated, though sessions were committed
    assert p.per_role["user_sim"].projected_usd == 1.4 and not p.per_role["user_sim"].measured


def overrun(factor: float) -> float:
    """The projection's ratio when the committed sessions spent ``factor`` x the user simulator's share."""
    first = first_estimate({"user_sim": role(1_000_000, 0, 1.0, "m")})
    progress = Progress(committed=10, planned=100, spent=[spend("user_sim", "m", prompt_tokens=100_000 * factor)])
    p = project(first, progress, {"m": Price(input=1.0, output=1.0)})
    assert p.exceeded == (p.ratio > OVERRUN)
    return p


def test_the_threshold_is_exceeded_only_above_125_percent():
    assert overrun(1.25).ratio == pytest.approx(1.25) and not overrun(1.25).exceeded
    assert overrun(1.24).exceeded is False
    assert overrun(1.26).exceeded is True
    assert overrun(0.5).exceeded is False
    warned = overrun(2.0)
    assert warning_line(warned).startswith("cost warning: the projected total $2.00 is 200% of the first estimate $1.00")
    assert "Ctrl-C stops the run and every committed session is kept" in warning_line(warned)


def test_unpriced_or_free_models_are_compared_in_tokens():
    first = first_estimate({"user_sim": role(1_000, 200, None, "m")})
    progress = Progress(committed=1, planned=4, spent=[spend("user_sim", "m", prompt_tokens=400, completion_tokens=100)])
    p = project(first, progress, {})
    assert p.unit == "tokens" and p.projected_usd is None and p.ratio == pytest.approx(2_000 / 1_200) and p.exceeded
    assert line(p) == (f"tokens so far 500; projected total 2,000 tokens (first estimate 1,200 tokens; cost: {NO_PRICE}); "
                       "1 of 4 sessions committed")
    free = project(first_estimate({"user_sim": role(1_000, 200, 0.0, "m")}), progress, {"m": Price.free()})
    assert free.unit == "tokens" and "the models are priced at $0" in line(free)


def test_the_line_in_dollars():
    p = overrun(1.1)
    assert line(p) == "cost so far $0.11; projected total $1.10 (first estimate $1.00); 10 of 100 sessions committed"
    assert p.record("now")["projected_usd"] == pytest.approx(1.1) and p.record("now")["exceeded"] is False


def test_first_projection_waits_for_5_percent_or_one_shard():
    assert first_after(24, 4) == 2  # 5 % of 24 = 1.2 -> 2 sessions
    assert first_after(100_000, 16) == 16  # one shard, not 5,000 sessions
    assert first_after(1, 16) == 1


def test_a_projection_is_shown_again_only_when_it_moved_materially():
    a, b, c = overrun(1.0), overrun(1.05), overrun(1.2)
    assert changed(None, a) and not changed(a, b) and changed(a, c)
    assert changed(c, overrun(1.3))  # crossing the threshold is always shown


def test_the_reports_note_is_the_last_recorded_reestimate():
    from ray_knowsim.preflight.projection import recorded_note

    records = [overrun(1.1).record("t1"), overrun(2.0).record("t2")]
    manifest = {"invocations": [{"cost_reestimates": {"records": records}}, {"status": "ok"}]}
    assert recorded_note(manifest) == (
        "Re-estimated while it ran from its committed sessions' spend: last projected total $2.00 after 10 of 100 sessions, "
        "first estimate $1.00 (200% of it); above 125% of the first estimate at 1 of 2 re-estimates shown, and the run warned.")
    assert recorded_note({"invocations": [{"status": "ok"}]}) is None
