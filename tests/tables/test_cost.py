"""Prices, session cost and the cost table: hand-computed answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from pydantic import ValidationError

from ray_knowsim.config import parse_run_config
from ray_knowsim.tables.cost import cost_table
from ray_knowsim.plan.build import model_prices
from ray_knowsim.schema.chat import Usage
from ray_knowsim.schema.price import Price
from ray_knowsim.sim.cost import session_cost
from tests.doubles.run_config import small_config


def test_price_cost_hand_computed():
    p = Price(input=2.5, cached_input=1.25, output=10.0)
    # 1,000 prompt tokens of which 400 cached, 200 completion tokens
    assert p.cost(1000, 200, 400) == pytest.approx((600 * 2.5 + 400 * 1.25 + 200 * 10.0) / 1e6)
    assert Price(input=1.0, output=2.0).cost(1000, 0, 1000) == pytest.approx(1000 * 1.0 / 1e6)  # no cache discount
    assert Price.free().cost(10**9, 10**9) == 0.0
    with pytest.raises(ValidationError):
        Price(input=-1, output=0)


def test_session_cost_per_role_model_and_unknown_price():
    usage = {"user_sim": Usage(1000, 100), "assistant": Usage(2000, 500, 1000), "extractor": Usage(0, 0)}
    prices = {"cheap": Price(input=1.0, output=2.0), "big": Price(input=3.0, cached_input=0.3, output=15.0)}
    got = session_cost(usage, {"user_sim": "cheap", "assistant": "big", "extractor": "big"}, prices)
    want = (1000 * 1 + 100 * 2) / 1e6 + (1000 * 3 + 1000 * 0.3 + 500 * 15) / 1e6
    assert got == pytest.approx(want)
    assert session_cost(usage, {"user_sim": "nope", "assistant": "big", "extractor": "big"}, prices) is None
    # a called role whose model has no price makes the cost unknown even when its calls reported no
    # tokens (failed requests): an unpriced all-failed run must not read "$0.0000"
    assert session_cost(usage, {"user_sim": "cheap", "assistant": "big", "extractor": "nope"}, prices) is None
    assert session_cost({"extractor": Usage(0, 0)}, {"extractor": "nope"}, prices) is None


def test_one_wording_for_no_price():
    from ray_knowsim.schema.price import NO_PRICE, usd_text

    assert usd_text(0.5) == "$0.5000" and usd_text(0.0) == "$0.0000"  # priced and free
    assert usd_text(None) == usd_text(float("nan")) == NO_PRICE == "no price given"
    assert usd_text(float("nan"), 3, 10) == "no price given (3 of 10 sessions priced)"


def test_price_in_config_is_optional_and_out_of_the_hash():
    base = small_config()
    priced = small_config(models={"sim": {"backend": "offline", "price": {"input": 0.15, "output": 0.6}}})
    a, b = parse_run_config(base), parse_run_config(priced)
    assert a.config_hash() == b.config_hash()
    assert model_prices(a)["sim"] == Price.free() and model_prices(b)["sim"].output == 0.6
    http = small_config(models={"sim": {"backend": "offline"},
                                "api": {"backend": "http", "model": "m", "base_url": "http://x/v1",
                                        "price": {"input": 1, "output": 4, "cached_input": 0.5}}})
    cfg = parse_run_config(http)
    assert cfg.models["api"].http_config().model == "m" and "api" in model_prices(cfg)


def test_cost_table_sums_per_condition_and_run():
    rows = []
    for cond, cost in (("a", 0.5), ("a", 0.25), ("b", None)):
        rows.append({"task": "math", "condition": cond, "status": "ok", "llm_calls": 4, "cost_usd": cost,
                     "prompt_tokens_assistant": 100, "completion_tokens_assistant": 10})
    df = pd.DataFrame(rows)
    for c in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
        for r in ("user_sim", "assistant", "extractor", "judge"):
            df[f"{c}_{r}"] = df.get(f"{c}_{r}", 0)
    t = cost_table(df).set_index(["task", "condition"])
    assert t.loc[("math", "a"), "cost_usd"] == pytest.approx(0.75) and t.loc[("math", "a"), "requests"] == 8
    assert t.loc[("math", "a"), "prompt_tokens"] == 200 and t.loc[("math", "a"), "cost_usd_per_session"] == pytest.approx(0.375)
    assert math.isnan(t.loc[("math", "b"), "cost_usd"])  # an unpriced session: unknown, not 0
    assert t.loc[("all", "all"), "n_sessions"] == 3 and t.loc[("all", "all"), "priced_sessions"] == 2
