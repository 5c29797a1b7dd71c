"""``run --dry-run`` for a config of HTTP models (no server exists: nothing may be called)."""

from __future__ import annotations

import math

import pytest

from ray_knowsim.config import parse_run_config
from ray_knowsim.preflight.estimate import char_proxy, dry_run, filler
from ray_knowsim.llm.offline import ntokens
from tests.doubles.run_config import small_config


def http_config(**over):
    api = {"backend": "http", "model": "some-model", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "NO_SUCH_KEY",
           "requests_per_minute": 60, "price": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    return small_config(models={"api": api}, roles={"user_sim": "api", "extractor": "api", "judge": "api",
                                                     "assistant": {"model": "api"}},
                        engine={"shard_size": 4}, **over)


def test_filler_counts_the_same_under_both_counters():
    assert ntokens(filler(37)) == 37 and char_proxy(filler(37)) == 37


def test_http_dry_run_counts_with_the_character_proxy_and_respects_rate_limits(tmp_path):
    cfg = parse_run_config(http_config())
    est, path = dry_run(cfg, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["estimate.json"]
    assert est.n_sessions == 24
    assert est.totals.requests == 24 * (3 * 3 + 1)
    assert "character proxy" in est.per_role["extractor"].token_counter
    # prompts grow over turns: the whole run costs more than 3 x the first turn
    first = est.first_turn["assistant"]
    assert est.per_role["assistant"].prompt_tokens > 3 * first.mean_prompt_tokens * 24 * 0.99
    # cost: the stable prefixes of later turns at the cached price (no cache-write premium given)
    want = sum((e.prompt_tokens - e.cached_prompt_tokens) * 2.0 + e.cached_prompt_tokens * 0.5 + e.completion_tokens * 8.0
               for e in est.per_role.values()) / 1e6
    assert est.totals.cost_usd == pytest.approx(want)
    assert est.per_role["extractor"].cached_prompt_tokens > 0.3 * est.per_role["extractor"].prompt_tokens
    assert est.per_role["judge"].cached_prompt_tokens == 0
    assert est.upper_bound.completion_tokens > est.totals.completion_tokens
    # 240 requests at 60 per minute on one endpoint: at least 4 minutes
    assert est.totals.minutes >= 240 / 60
    assert est.assumptions["wall_time"]["endpoints"]["api"]["minutes"] == pytest.approx(4.0)


def test_unpriced_model_leaves_cost_unknown(tmp_path):
    cfg = http_config()
    del cfg["models"]["api"]["price"]
    est, _ = dry_run(parse_run_config(cfg), tmp_path / "run")
    assert est.totals.cost_usd is None and est.totals.prompt_tokens > 0
    assert all(v.cost_usd is None for v in est.per_condition.values())
    assert not math.isnan(est.totals.minutes)


def test_the_dry_run_counts_the_first_turn_the_loop_sends(tmp_path):
    """The estimate and the loop build a turn's requests in one place (sim/requests.py): the
    learner prompt the dry run counts for turn 1 is, token for token, the one every session sends
    (offline models: their own count), for structured and baseline learners alike."""
    import asyncio

    from ray_knowsim.backends.model_set import build_models
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.run.worker import with_initial_states
    from ray_knowsim.llm.accounting import Accounting
    from ray_knowsim.llm.recording import RecordingModel
    from ray_knowsim.sim.shard import run_shard

    cfg = parse_run_config(small_config(max_turns=1, conditions=[{"strategy": "adaptive"}, {"simulator": "zero-shot-cot"}]))
    est, _ = dry_run(cfg, tmp_path / "run")
    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    ctx = make_context(cfg, "t", cfg.config_hash())
    recorders: list[RecordingModel] = []

    models = build_models(cfg, inputs.graphs, None)
    for k in range(plan.n_shards):
        role_models = models.role_models(Accounting())
        role_models.user_sim = RecordingModel(role_models.user_sim)
        recorders.append(role_models.user_sim)

        async def drain(shard=with_initial_states(plan.shard(k), ctx)):
            return [r async for r in run_shard(shard, role_models, ctx)]

        asyncio.run(drain())
    sent = [c.request for rec in recorders for c in rec.calls]
    counts = [sum(ntokens(m["content"]) for m in r.messages) for r in sent if r.role == "user_sim"]
    first = est.first_turn["user_sim"]
    assert len(counts) == first.rendered == est.n_sessions
    assert (min(counts), max(counts)) == (first.min_prompt_tokens, first.max_prompt_tokens)
    assert sum(counts) / len(counts) == pytest.approx(first.mean_prompt_tokens)


@pytest.fixture
def long_replies():
    """A strategy registered from outside the package with its own expected reply lengths (and
    the checklist plugin, which names none), gone afterwards."""
    import importlib
    import sys

    from ray_knowsim.strategies import STRATEGIES, TutorStrategy, register_strategy

    importlib.import_module("tests.plugins.checklist_strategy")
    register_strategy(TutorStrategy(name="long_replies", template="assistant_adaptive", reply_tokens=777.0,
                                    offline_reply_words=133.0))
    yield
    STRATEGIES._items.pop("long_replies", None)
    STRATEGIES._items.pop("checklist", None)
    sys.modules.pop("tests.plugins.checklist_strategy", None)


def test_the_prior_reads_each_strategys_reply_length_from_the_strategy(tmp_path, long_replies):
    """An alias gets its strategy's length (minimal = simple: 120 tokens, not the 442.5 mean a table
    keyed by the old name gave the name), a plugin strategy its own, one that names none the
    built-ins' mean; in the unit of the backend the conditions talk to (the offline model's words)."""
    from ray_knowsim.preflight.estimate import prior_completions

    conditions = [{"strategy": s} for s in ("minimal", "simple", "long_replies", "checklist")]
    http = prior_completions(parse_run_config(http_config(conditions=conditions)))
    assert {s: http.assistant_for(s) for s in ("minimal", "simple", "long_replies", "checklist")} == {
        "minimal": 120.0, "simple": 120.0, "long_replies": 777.0, "checklist": 442.5}
    offline = prior_completions(parse_run_config(small_config(conditions=conditions)))
    assert {s: offline.assistant_for(s) for s in ("minimal", "simple", "long_replies", "checklist")} == {
        "minimal": 26.0, "simple": 26.0, "long_replies": 133.0, "checklist": 91.5}
    # and the dry run spends them: the assistant's completions over the conditions' requests
    est, _ = dry_run(parse_run_config(http_config(conditions=conditions)), tmp_path / "run")
    per_request = {name: t.completion_tokens for name, t in est.per_condition.items()}
    assert per_request["api:long_replies"] > per_request["api:checklist"] > per_request["api:simple"]


def test_the_estimate_shares_one_index_per_item_and_counts_as_with_one_per_session(monkeypatch):
    """The estimate starts its sessions with one GraphIndex per item (sim.session.shared_indexes),
    as the shards do: every session of an item gets the same object, and the estimate equals the
    one made with a fresh index per session (an index is only read)."""
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.preflight import estimate as estimate_module
    from ray_knowsim.schema.graph import build_index
    from ray_knowsim.sim import session as session_module

    cfg = parse_run_config(small_config(max_turns=2, conditions=[{"strategy": "adaptive"}, {"simulator": "zero-shot-cot"}]))
    inputs = load_inputs(cfg)
    plan = Plan(cfg, inputs)
    seen: dict[str, set[int]] = {}
    start = session_module.start_session

    def spying_start(spec, item, graph, rules, index=None):
        assert index is not None, "the estimate started a session without the item's shared index"
        seen.setdefault(spec.item_key, set()).add(id(index))
        return start(spec, item, graph, rules, index)

    monkeypatch.setattr(session_module, "start_session", spying_start)
    shared = estimate_module.estimate(cfg, plan, inputs)
    assert seen and all(len(ids) == 1 for ids in seen.values())
    assert sum(1 for _ in plan.iter_sessions()) > len(seen)  # items with several sessions each

    monkeypatch.setattr(session_module, "shared_indexes", lambda: (lambda item, graph: build_index(graph, item.id)))
    assert estimate_module.estimate(cfg, plan, inputs) == shared


def test_a_stable_prefix_is_read_from_the_cache_only_from_the_providers_minimum():
    from ray_knowsim.preflight.estimate import cache_tokens

    # turn 2 shares 500 tokens (under the minimum: cached by nobody), turn 3 1,500, turn 4 1,400, turn 5 2,000
    assert cache_tokens([0, 500, 1500, 1400, 2000], 1024) == (1500 + 1400 + 2000, 1500 + 600)
    assert cache_tokens([0, 500, 1500, 1400, 2000], 4096) == (0, 0)
    assert cache_tokens([0, 0, 0], 0) == (0, 0)


def test_the_stable_prefix_counts_what_repeats_the_previous_prompt():
    from ray_knowsim.preflight.estimate import stable_prefix_tokens

    prev = [{"role": "system", "content": "s" * 400}, {"role": "user", "content": "abcd" * 10 + "old facts"}]
    cur = [{"role": "system", "content": "s" * 400}, {"role": "user", "content": "abcd" * 10 + "abcd new facts"}]
    assert stable_prefix_tokens(prev, cur, char_proxy) == 100 + 10  # the system message, then 40 shared characters
    assert stable_prefix_tokens(prev, [{"role": "user", "content": "s" * 400}], char_proxy) == 0


def priced(**price):
    cfg = http_config(max_turns=6)
    cfg["models"]["api"]["price"] = {"input": 2.0, "output": 8.0, **price}
    return cfg


def test_a_cache_minimum_above_every_stable_prefix_caches_nothing(tmp_path):
    est, _ = dry_run(parse_run_config(priced(cached_input=0.2, cache_min_tokens=1_000_000)), tmp_path / "run")
    assert est.totals.cached_prompt_tokens == 0
    assert est.totals.cost_usd == pytest.approx((est.totals.prompt_tokens * 2.0 + est.totals.completion_tokens * 8.0) / 1e6)
    low, _ = dry_run(parse_run_config(priced(cached_input=0.2, cache_min_tokens=16)), tmp_path / "low")
    assert low.totals.cached_prompt_tokens > 0.5 * low.totals.prompt_tokens
    assert low.totals.cost_usd < 0.7 * est.totals.cost_usd


def test_a_providers_cache_write_premium_is_priced_and_stated(tmp_path):
    from ray_knowsim.preflight.estimate import summary_lines

    est, _ = dry_run(parse_run_config(priced(provider="anthropic")), tmp_path / "run")
    t = est.totals
    assert t.cached_prompt_tokens > 0 and t.cache_write_tokens > 0
    plain = t.prompt_tokens - t.cached_prompt_tokens - t.cache_write_tokens
    want = (plain * 2.0 + t.cached_prompt_tokens * 0.2 + t.cache_write_tokens * 2.5 + t.completion_tokens * 8.0) / 1e6
    assert t.cost_usd == pytest.approx(want)
    text = "\n".join(summary_lines(est))
    assert "cache minimum 1,024 tokens (provider anthropic's default)" in text and "cache write $2.5" in text
    assert est.assumptions["prompt_cache"]["models"]["api"]["min_tokens"] == 1024


def test_an_assumed_cache_minimum_is_said_to_be_assumed(tmp_path):
    from ray_knowsim.preflight.estimate import summary_lines

    est, _ = dry_run(parse_run_config(http_config()), tmp_path / "run")
    assert "cache minimum 1,024 tokens (assumed: the price names neither cache_min_tokens nor a provider)" in "\n".join(summary_lines(est))


def test_stated_reasoning_tokens_are_billed_as_output_within_the_budget(tmp_path):
    from ray_knowsim.preflight.estimate import summary_lines

    raw = http_config()
    raw["roles"]["extractor"] = {"model": "api", "max_tokens": 3000}
    cfg = parse_run_config(raw)
    plain, _ = dry_run(cfg, tmp_path / "plain")
    thinks, _ = dry_run(cfg, tmp_path / "thinks", reasoning={"extractor": 2000.0, "judge": 500.0})
    e0, e1 = plain.per_role["extractor"], thinks.per_role["extractor"]
    answer = e0.completion_tokens_per_request
    assert e1.completion_tokens_per_request == pytest.approx(min(answer + 2000, 3000), abs=1)  # the budget holds both
    assert e1.reasoning_tokens == e1.completion_tokens - e0.completion_tokens > 0 and e0.reasoning_tokens == 0
    assert thinks.per_role["judge"].reasoning_tokens == 500 * thinks.per_role["judge"].requests
    assert thinks.per_role["user_sim"].completion_tokens == plain.per_role["user_sim"].completion_tokens
    extra = sum(thinks.per_role[r].reasoning_tokens for r in ("extractor", "judge")) * 8.0 / 1e6
    assert thinks.totals.cost_usd == pytest.approx(plain.totals.cost_usd + extra)
    assert "reasoning: none assumed" in "\n".join(summary_lines(plain))
    assert "reasoning: extractor 2,000, judge 500 tokens per request assumed" in "\n".join(summary_lines(thinks))


def test_reasoning_tokens_are_read_per_role_or_for_all():
    from ray_knowsim.preflight.estimate import parse_reasoning

    assert parse_reasoning(["1000", "extractor=3000"]) == {"user_sim": 1000, "assistant": 1000, "extractor": 3000, "judge": 1000}
    for bad in ("learner=5", "extractor=many", "-3"):
        with pytest.raises(ValueError, match="--reasoning-tokens"):
            parse_reasoning([bad])


def test_the_cli_states_reasoning_and_refuses_it_beside_a_measured_run(tmp_path, capsys):
    from ray_knowsim.cli.main import main as cli_main
    from tests.doubles.run_config import write_config

    path = write_config(tmp_path, http_config())
    assert cli_main(["run", str(path), "--dry-run", "-o", str(tmp_path / "out"), "--reasoning-tokens", "extractor=1000"]) == 0
    assert "reasoning: extractor 1,000 tokens per request assumed" in capsys.readouterr().out
    assert cli_main(["run", str(path), "--dry-run", "-o", str(tmp_path / "o2"), "--reasoning-tokens", "9",
                     "--from-run", str(tmp_path / "out")]) == 2
    assert "already hold what its models thought" in capsys.readouterr().err
