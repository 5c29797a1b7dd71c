"""Benchmark: the dry run's completion tokens against real models' recorded answers.

The KnowSim authors' release records four conversations with real models (``examples/``: math_003
and math_004, novice, Adaptive tutor; structured learner for 15 turns, ZS-CoT baseline learner
until its termination judge ended it). This plans the same sessions (the same items, graphs, level,
strategy and simulators, HTTP models that count with the character proxy, as the recorded lengths
are counted) and puts the estimate's completion tokens per request beside the recorded answers'
per role (:mod:`ray_knowsim.preflight.priors` rebuilds and counts them), and the structured
sessions' whole completion bill (both run 15 turns; the baselines' recorded turns are fewer than
the ``max_turns`` the estimate assumes, so they are compared per request only). At Gemini 3 Flash's
list prices it also prints the share of prompt tokens the estimate prices as cached, and the cost
with and without that cache.

Run: ``python scripts/bench/estimate_vs_reference.py [KNOWSIM_REF]`` (default
``../shared/knowsim-ref`` beside the checkout). The last line is one JSON object.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from ray_knowsim.config import parse_run_config
from ray_knowsim.preflight.estimate import dry_run
from ray_knowsim.preflight.priors import answer_samples

EXAMPLES = ("mathqa_structured_adaptive_novice.json", "mathqa_baseline_zero-shot-cot_novice.json")


def config(ref: Path, out: Path) -> dict:
    model = {"backend": "http", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "NO_SUCH_KEY",
             "price": {"input": 0.5, "cached_input": 0.05, "output": 3.0, "provider": "gemini"}}  # Gemini 3 Flash's list prices
    return {"name": "estimate_vs_reference", "max_turns": 15, "levels": ["novice"], "graph_mode": "reference",
            "tasks": [{"name": "math", "items": str(ref / "paper_subset/math.jsonl"), "graphs": str(ref / "iu_cache/math.json"),
                       "item_ids": ["math_003", "math_004"]}],
            "init_cache": str(ref / "init_ks_cache.json"), "models": {"m": model},
            "roles": {"user_sim": "m", "extractor": "m", "judge": "m", "assistant": {"model": "m"}},
            "conditions": [{"strategy": "adaptive"}, {"strategy": "adaptive", "simulator": "zero-shot-cot"}],
            "output_dir": str(out)}


def recorded(records: list[dict]) -> dict[str, dict[str, float]]:
    """Per role: answers and tokens as the run asks them (one rating per session, at its end)."""
    finals = [{k: v for k, v in r.items() if k != "judged_metrics_at_early_stop"} for r in records]
    samples = answer_samples(finals)
    judge = [samples[k] for k in ("judge", "judge_termination") if k in samples]
    ext_turns = sum(len(r.get("iu_analysis_history") or []) for r in records)
    out = {"user_sim": samples["user_sim"], "assistant": samples["assistant:adaptive"],
           "extractor": (samples["extractor_per_iu"][0], ext_turns),
           "judge": (sum(t for t, _ in judge), sum(n for _, n in judge))}
    return {role: {"requests": n, "completion_tokens": t, "per_request": t / n} for role, (t, n) in out.items()}


def main(argv: list[str]) -> dict:
    ref = Path(argv[0]) if argv else Path(__file__).resolve().parents[3] / "shared" / "knowsim-ref"
    records = [r for name in EXAMPLES for r in json.loads((ref / "examples" / name).read_text(encoding="utf-8"))]
    with tempfile.TemporaryDirectory() as tmp:
        est, _ = dry_run(parse_run_config(config(ref, Path(tmp))), Path(tmp) / "run")
    real = recorded(records)
    structured = recorded([r for r in records if r.get("simulation_method") == "structured"])
    by_role = {}
    for role, e in est.per_role.items():
        got = real[role]["per_request"]
        by_role[role] = {"estimate_per_request": round(e.completion_tokens_per_request, 1), "recorded_per_request": round(got, 1),
                         "ratio": round(e.completion_tokens_per_request / got, 3)}
        print(f"{role:10s} estimate {e.completion_tokens_per_request:8.1f} / recorded {got:8.1f} per request = "
              f"{e.completion_tokens_per_request / got:.2f}x")
    # the structured sessions' completions (15 turns both): the estimate's per-session share of them
    est_struct = sum(est.per_role[r].completion_tokens_per_request * 30 for r in ("user_sim", "assistant", "extractor"))
    rec_struct = sum(structured[r]["completion_tokens"] for r in ("user_sim", "assistant", "extractor"))
    print(f"structured sessions' loop completions: estimate {est_struct:,.0f} / recorded {rec_struct:,.0f} = "
          f"{est_struct / rec_struct:.2f}x")
    cached = {r: round(e.cached_prompt_tokens / e.prompt_tokens, 3) for r, e in est.per_role.items() if e.prompt_tokens}
    uncached = sum(e.cost_usd + (e.cached_prompt_tokens * (0.5 - 0.05)) / 1e6 for e in est.per_role.values())
    print(f"cached share of prompt tokens {cached}; cost ${est.totals.cost_usd:.4f} with the cache, ${uncached:.4f} without "
          f"({uncached / est.totals.cost_usd:.2f}x)")
    return {"per_role": by_role, "structured_loop_completion_ratio": round(est_struct / rec_struct, 3), "cached_share": cached,
            "cost_usd": round(est.totals.cost_usd, 4), "cost_usd_uncached": round(uncached, 4)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
