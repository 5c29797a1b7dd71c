"""Micro-benchmark: the CPU of building a shard's requests (issue 30), in one process, no HTTP.

Runs an in-process shard of demo sessions (the structured learner with every tutor strategy, the
three baselines, every level; prompt set v3; ``--turns`` turns) against the offline model, and
times with ``time.process_time`` only what builds the requests: the three renderers as the loop
calls them (:class:`ray_knowsim.sim.requests.TurnRequests`) and the HTTP body each request would
be sent as (``build_payload`` + ``encode_body`` for our offline server). The first run warms up
(imports, template loads, per-graph caches), the next ``--repeats`` are reported (median).
``replay_us``: the same requests' render+body replayed back to back (:func:`_replay`).

A/B: ``--ab OLD_TREE NEW_TREE`` (two source trees, e.g. ``git archive`` copies of two commits)
alternates runs of this script with each tree first on ``PYTHONPATH``, ``--pairs`` times, and
prints both medians and their ratio.

Run: ``source scripts/_venv.sh && python scripts/bench/render.py`` (``--sessions``, ``--turns``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path


def _measure(sessions: int, turns: int, repeats: int) -> dict:
    from ray_knowsim.demo import demo_items
    from ray_knowsim.llm.http.client import OpenAICompatibleModel, encode_body
    from ray_knowsim.llm.http.config import HTTPModelConfig
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.sim import requests as turn_requests
    from tests.doubles.sim_shard import context, offline_models, run, session, shard_of

    clock = {"render": 0.0, "body": 0.0, "n": 0}
    http = OpenAICompatibleModel(HTTPModelConfig(base_url="http://127.0.0.1:1/v1", model="offline",
                                                 structured_output="json_object", offline_server=True))

    def timed(method):
        def wrapper(*args, **kwargs):
            t = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                clock["render"] += time.process_time() - t
        return wrapper

    cls = turn_requests.TurnRequests
    for name in ("learner", "assistant", "extractor"):
        setattr(cls, name, timed(getattr(cls, name)))

    class BodyTimer:
        def __init__(self, inner) -> None:
            self.inner, self.name = inner, inner.name

        async def generate(self, request):
            t = time.process_time()
            encode_body(http.build_payload(request))
            clock["body"] += time.process_time() - t
            clock["n"] += 1
            return await self.inner.generate(request)

    items = demo_items()
    sims = [("structured", s) for s in ("minimal", "adaptive", "socratic", "comprehensive")] + [
        ("zero-shot", "adaptive"), ("zero-shot-cot", "socratic"), ("zero-shot-cot-user-profile", "comprehensive")]
    specs, k = [], 0
    while len(specs) < sessions:
        item = items[k % len(items)]
        simulator, strategy = sims[(k // len(items)) % len(sims)]
        specs.append(session(item, ("novice", "intermediate", "advanced")[k % 3], strategy, simulator, trial=k))
        k += 1
    shard = shard_of(specs)
    ctx = replace(context(max_turns=turns), prompts="v3")
    models = offline_models(BodyTimer(OfflineModel()))
    runs = []
    for r in range(repeats + 1):
        clock.update(render=0.0, body=0.0, n=0)
        run(shard, models, ctx)
        if r:
            runs.append(dict(clock))
    n = runs[0]["n"]
    render = statistics.median(x["render"] for x in runs) / n * 1e6
    body = statistics.median(x["body"] for x in runs) / n * 1e6
    out = {"requests": n, "render_us": round(render, 2), "body_us": round(body, 2), "total_us": round(render + body, 2)}
    out["replay_us"] = _replay(shard, ctx, http, encode_body, repeats)
    return out


def _replay(shard, ctx, http, encode_body, repeats: int) -> float:
    """Render+body CPU per request with nothing else running between the calls: the shard's
    renderer calls are recorded once (their inputs copied as they were), then replayed
    ``10 * repeats`` times back to back. Steadier than the in-run figure, which also carries the
    collections and cache misses the rest of the loop causes."""
    from ray_knowsim.llm.offline import OfflineModel
    from ray_knowsim.sim import requests as turn_requests
    from tests.doubles.sim_shard import offline_models, run

    calls = []
    cls = turn_requests.TurnRequests
    ext, ast = turn_requests.render_extractor, turn_requests.render_assistant

    def rec_ext(item, graph, states, prior, user, reply, **kw):
        calls.append((ext, (item, graph, dict(states), [list(t) for t in prior], user, reply), kw))
        return ext(item, graph, states, prior, user, reply, **kw)

    def rec_ast(item, strategy, transcript, **kw):
        calls.append((ast, (item, strategy, [list(t) for t in transcript]), kw))
        return ast(item, strategy, transcript, **kw)

    def learner(self, live, transcript, turn):
        view = live.learner_view(transcript, prompts=self.prompts, connectable=self.connectable,
                                 seed=self._seed(live, "user_sim", turn), request_id=self._id(live, "user_sim", turn))
        view = replace(view, states=dict(view.states), transcript=[list(t) for t in view.transcript])
        calls.append((live.simulator.render, (view,), {}))
        return live.simulator.render(view)

    saved = (cls.learner, ext, ast)
    cls.learner, turn_requests.render_extractor, turn_requests.render_assistant = learner, rec_ext, rec_ast
    try:
        run(shard, offline_models(OfflineModel()), ctx)
    finally:
        cls.learner, turn_requests.render_extractor, turn_requests.render_assistant = saved
    for f, a, kw in calls:  # warm
        encode_body(http.build_payload(f(*a, **kw)))
    rounds = 10 * repeats
    t = time.process_time()
    for _ in range(rounds):
        for f, a, kw in calls:
            encode_body(http.build_payload(f(*a, **kw)))
    return round((time.process_time() - t) / rounds / len(calls) * 1e6, 2)


def _ab(old: str, new: str, pairs: int, argv: list[str]) -> None:
    results: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(pairs):
        for label, tree in (("old", old), ("new", new)):
            env = {**os.environ, "PYTHONPATH": tree}
            out = subprocess.run([sys.executable, __file__, *argv], cwd=tree, env=env, check=True,
                                 capture_output=True, text=True).stdout
            results[label].append(json.loads(out.strip().splitlines()[-1]))
            print(label, results[label][-1], flush=True)
    for key in ("render_us", "body_us", "total_us", "replay_us"):
        o = statistics.median(x[key] for x in results["old"])
        n = statistics.median(x[key] for x in results["new"])
        print(f"{key}: old {o:.1f} us/request, new {n:.1f} us/request, old/new {o / n:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=140)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ab", nargs=2, metavar=("OLD_TREE", "NEW_TREE"))
    ap.add_argument("--pairs", type=int, default=3)
    args = ap.parse_args()
    if args.ab:
        _ab(str(Path(args.ab[0]).resolve()), str(Path(args.ab[1]).resolve()), args.pairs,
            ["--sessions", str(args.sessions), "--turns", str(args.turns), "--repeats", str(args.repeats)])
        return
    sys.path.insert(0, os.getcwd())
    print(json.dumps(_measure(args.sessions, args.turns, args.repeats)))


if __name__ == "__main__":
    main()
