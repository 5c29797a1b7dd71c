"""The Python part of scripts/gpu_smoke.sh: our vLLM engine actors on a GPU machine, end to end.

Steps (each prints PASS/FAIL with its time; the last line is one JSON object):
 1. imports and driver (torch.cuda, vLLM, Ray versions);
 2. pool start: 2 replicas of SMOKE_MODEL sharing one GPU (num_gpus 0.45 each);
 3. 64 structured requests of every structured role (user simulator, extractor, judge: rater and
    termination), recorded from a real shard run of the demo items, all parse with our schemas;
 4. overlong-request isolation: 63 requests + 1 over max_model_len -> exactly one
    vllm_prompt_too_long, the rest answered;
 5. concurrent callers: 8 callers x 16 requests at once, all answered;
 6. determinism at temperature 0 across batch mixes: the same requests alone and mixed into a
    batch of others give the same text;
 7. prefix-cache hits: a session's second turn (same prefix, same replica) reports cached tokens;
 8. a 2-turn simulation of 4 sessions through the real shard loop, every role on the pool;
 9. shutdown and released memory: engines stopped, GPU memory back.

Only steps 3's request recording and the checks' helpers run on CPU (tests/backends/test_gpu_smoke.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time
from typing import Any, Callable

ROLES_STRUCTURED = ("user_sim", "extractor", "judge")
RESULTS: dict[str, Any] = {}


def step(name: str) -> Callable:
    def wrap(fn: Callable) -> Callable:
        def run(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                out = fn(*a, **k)
            except Exception as exc:  # noqa: BLE001 - a smoke test reports and goes on where it can
                RESULTS[name] = {"ok": False, "s": round(time.perf_counter() - t, 1), "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(f"FAIL {name}: {RESULTS[name]['error']}", flush=True)
                return None
            RESULTS[name] = {"ok": True, "s": round(time.perf_counter() - t, 1), **(out if isinstance(out, dict) else {})}
            print(f"PASS {name} ({RESULTS[name]['s']} s) {out if isinstance(out, dict) else ''}", flush=True)
            return out
        return run
    return wrap


def demo_shard(n_sessions: int = 24, max_turns: int = 2) -> tuple[Any, Any]:
    """A shard of the packaged demo items and a context with every role (judge included)."""
    from ray_knowsim.config import parse_run_config
    from ray_knowsim.plan.sessions import Plan, load_inputs
    from ray_knowsim.plan.build import make_context
    from ray_knowsim.run.worker import with_initial_states

    cfg = parse_run_config({
        "name": "smoke", "tasks": [{"name": "math", "items": "pkg:demo/math.jsonl", "graphs": "pkg:demo/iu_math.json"}],
        "models": {"m": {"backend": "offline"}}, "roles": {"user_sim": "m", "extractor": "m", "judge": "m", "assistant": {"model": "m"}},
        "conditions": [{"strategy": "adaptive"}, {"strategy": "socratic"}], "max_turns": max_turns,
        "engine": {"shard_size": n_sessions}})
    plan = Plan(cfg, load_inputs(cfg))
    ctx = make_context(cfg, "smoke", "smoke")
    return with_initial_states(plan.shard(0), ctx), ctx


def run_sessions(model: Any, shard: Any, ctx: Any) -> list[Any]:
    from ray_knowsim.sim.shard import run_shard
    from ray_knowsim.sim.types import RoleModels

    assistants = {s.assistant_model for s in shard.sessions}
    models = RoleModels(user_sim=model, extractor=model, assistants={a: model for a in assistants})

    async def go():
        return [r async for r in run_shard(shard, models, ctx)]

    return asyncio.run(go())


def recorded_requests(per_role: int = 64) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Real structured requests of every role, recorded from the offline model on the demo items
    (cycled up to ``per_role``), and the IU graphs by item for the extractor's parser."""
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.llm.recording import RecordingModel

    shard, ctx = demo_shard()
    off = OfflineModel(name="m")
    off.register_graphs(dict(shard.graphs))
    rec = RecordingModel(off)
    results = run_sessions(rec, shard, ctx)
    by_role: dict[str, list[Any]] = {}
    for req in (c.request for c in rec.calls):
        if req.json_schema is not None:
            by_role.setdefault(req.role, []).append(req)
    by_role["judge"] = judge_requests(shard, results)
    out = {}
    for role, reqs in by_role.items():
        out[role] = [dataclasses.replace(reqs[i % len(reqs)], request_id=f"smoke/{role}/{i}#0:{role}") for i in range(per_role)]
    return out, dict(shard.graphs)


def judge_requests(shard: Any, results: list[Any]) -> list[Any]:
    """The registered judges' requests over the finished transcripts (judging is its own stage)."""
    from ray_knowsim.score.judges import DEFAULT_JUDGES, JUDGES
    from ray_knowsim.score.transcripts import Transcript
    from ray_knowsim.sim.types import request_id, request_seed

    specs = {sp.session_id: sp for sp in shard.sessions}
    out = []
    for res in results:
        s = res.session
        if s.status != "ok":
            continue
        messages = [m for t in res.turns for m in (["user", t.user_message], ["assistant", t.assistant_message])]
        t = Transcript(session_id=s.session_id, task=s.task, item_id=s.item_id, knowledge_level=s.knowledge_level,
                       simulator=s.simulator, seed=s.seed, item=shard.item_of(specs[s.session_id]), messages=messages)
        for name in DEFAULT_JUDGES:
            judge = JUDGES.get(name)
            if judge.applies(t):
                out.append(judge.request(t, seed=request_seed(t.seed, "judge", judge.slot),
                                         request_id=request_id(t.session_id, "judge", judge.slot)))
    return out


def parses(req: Any, text: str) -> bool:
    """The reply validates against the output model the request names."""
    from ray_knowsim.schema import outputs

    cls = getattr(outputs, req.schema_name or "", None)
    if cls is None:
        json.loads(text)
        return True
    cls.model_validate_json(text)
    return True


def main() -> int:
    model_id = os.environ.get("SMOKE_MODEL", "Qwen/Qwen2.5-1.5B-Instruct")
    import ray

    from ray_knowsim.backends.vllm.config import VLLMModelConfig
    from ray_knowsim.backends.vllm.pool import VLLMPool
    from ray_knowsim.llm.protocol import generate_all
    from ray_knowsim.schema.chat import ChatRequest

    @step("1_imports_and_driver")
    def s1():
        import torch
        import vllm

        assert torch.cuda.is_available(), "torch sees no GPU"
        free, total = torch.cuda.mem_get_info()
        return {"vllm": vllm.__version__, "torch": torch.__version__, "cuda": torch.version.cuda, "ray": ray.__version__,
                "gpu": torch.cuda.get_device_name(0), "gpu_free_gib": round(free / 2**30, 1), "gpu_total_gib": round(total / 2**30, 1)}

    info = s1()
    if info is None:
        print(json.dumps(RESULTS))
        return 1
    ray.init(address="local", include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    cfg = VLLMModelConfig(model=model_id, served_name="smoke", num_gpus=0.45, gpu_memory_utilization=0.4, replicas=2,
                          max_model_len=4096, seed=0, secret_env=[n for n in ("HF_TOKEN",) if os.environ.get(n)])
    pool = VLLMPool(cfg)
    model = None
    try:
        @step("2_pool_start")
        def s2():
            pool.start()
            ready = pool.wait_ready(420)
            return {"replicas": len(ready), "startup_s": [round(r["startup_s"], 1) for r in ready]}

        if s2() is None:
            return 1
        model = pool.model()

        def ask(reqs):
            return asyncio.run(generate_all(model, reqs))

        @step("3_structured_every_role")
        def s3():
            by_role, _ = recorded_requests(64)
            counts = {}
            for role in ROLES_STRUCTURED:
                reqs = by_role.get(role, [])
                assert len(reqs) == 64, f"{role}: {len(reqs)} requests recorded"
                outs = ask(reqs)
                bad = []
                for r, o in zip(reqs, outs):
                    try:
                        assert o.error is None, o.error
                        parses(r, o.text)
                    except Exception as exc:  # noqa: BLE001
                        bad.append(f"{r.schema_name}: {str(exc)[:120]}")
                counts[role] = 64 - len(bad)
                assert not bad, f"{role}: {len(bad)} of 64 did not parse: {bad[:2]}"
            return {"parsed": counts}

        def short(i: int, tag: str, turn: int = 0) -> ChatRequest:
            return ChatRequest(messages=({"role": "user", "content": f"In one sentence: what is {i} + {i}?"},), max_tokens=32,
                               temperature=0.0, seed=i, request_id=f"{tag}/{i}#{turn}:assistant")

        @step("4_overlong_isolation")
        def s4():
            reqs = [short(i, "iso") for i in range(63)]
            reqs.insert(31, ChatRequest(messages=({"role": "user", "content": "word " * 6000},), max_tokens=8, request_id="iso/long#0:a"))
            outs = ask(reqs)
            failed = [o.error for o in outs if o.error]
            assert len(failed) == 1 and failed[0].startswith("vllm_prompt_too_long"), failed[:3]
            return {"failed": failed[0][:60]}

        @step("5_concurrent_callers")
        def s5():
            async def caller(c):
                return await generate_all(model, [short(i, f"cc{c}") for i in range(16)])

            async def all_callers():
                return await asyncio.gather(*(caller(c) for c in range(8)))

            outs = [o for part in asyncio.run(all_callers()) for o in part]
            assert len(outs) == 128 and all(o.error is None and o.text for o in outs)
            return {"answered": len(outs)}

        @step("6_determinism_temperature_0")
        def s6():
            probe = [short(i, "det") for i in range(4)]
            alone = ask(probe)
            mixed = ask([short(100 + i, "mix") for i in range(28)] + probe)[-4:]
            same = [a.text == b.text for a, b in zip(alone, mixed)]
            assert all(same), f"{same}: {[a.text for a in alone]} vs {[b.text for b in mixed]}"
            return {"identical": len(same)}

        @step("7_prefix_cache_hits")
        def s7():
            long_ctx = " ".join(f"Fact {i}: the number {i} is {'even' if i % 2 == 0 else 'odd'}." for i in range(150))
            first = ChatRequest(messages=({"role": "user", "content": long_ctx + " Which facts mention 7?"},), max_tokens=16,
                                request_id="pc/sess#0:assistant")
            second = dataclasses.replace(first, request_id="pc/sess#1:assistant",
                                         messages=first.messages + ({"role": "assistant", "content": "Fact 7."},
                                                                    {"role": "user", "content": "And 8?"}))
            ask([first])
            replica = model.replica_for(second.request_id)
            d = ray.get(pool.actors[replica].generate.remote(
                {"messages": list(second.messages), "temperature": 0.0, "max_tokens": 16, "seed": None, "json_schema": None,
                 "request_id": second.request_id}))
            assert d["error"] is None and d["cached_tokens"] > 0, d
            return {"cached_tokens": d["cached_tokens"], "prompt_tokens": d["prompt_tokens"]}

        @step("8_two_turn_simulation")
        def s8():
            shard, ctx = demo_shard(n_sessions=4, max_turns=2)
            results = run_sessions(model, shard, ctx)
            statuses = [r.session.status for r in results]
            assert len(results) == 4 and all(r.session.turns >= 1 for r in results), statuses
            return {"statuses": statuses, "turns": [r.session.turns for r in results]}

        s3(); s4(); s5(); s6(); s7(); s8()
    finally:
        @step("9_shutdown_released_memory")
        def s9():
            reports = pool.shutdown()
            assert all(r.get("released") for r in reports), reports
            import torch

            time.sleep(3)
            free, total = torch.cuda.mem_get_info()
            assert free > 0.9 * total, f"only {free / 2**30:.1f} of {total / 2**30:.1f} GiB free after shutdown"
            return {"gpu_free_gib": round(free / 2**30, 1)}

        s9()
        ray.shutdown()
    ok = all(v["ok"] for v in RESULTS.values())
    print(json.dumps({"ok": ok, "model": model_id, **RESULTS}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
