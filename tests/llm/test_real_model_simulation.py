"""A real (tiny) model through the whole turn loop: one structured session, two turns, run by
``run_shard`` with SmolLM2-135M in every role, once over the vLLM OpenAI server
(``OpenAICompatibleModel``, json_schema constrained decoding) and once over the Ray actor backend
(``VLLMActorModel``). Marker ``llm_cpu``: skipped outside .venv-llm or without the model.

It checks what a fake model cannot: every structured output of a real decoder validated on the
first try, and the tokens the backends report reach the session row, role by role.

Why the schemas are tightened here: a 135M model under constrained decoding rambles inside
free-text fields ("1.1.1.1...") or repeats list entries until ``max_tokens`` cuts the JSON, so
the session fails for a reason that says nothing about our code. ``Bounded`` therefore sends, for
the same requests, a stricter schema than the portable one the renderers emit: every free-text
string gets a ``maxLength`` and the extractor's list gets exactly one entry per IU, in graph order
(``prefixItems`` with ``const`` ids). Both backends pass a request's schema to vLLM (xgrammar)
verbatim, so this changes what the decoder may emit, never how we read or judge it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass, replace
from typing import Any

import pytest

try:
    from llm_cpu_fixtures import (  # noqa: F401  (pytest finds fixtures by name)
        SERVED_MODEL_NAME, llm_ray, smollm2_dir, vllm_cpu_config, vllm_cpu_pool, vllm_server,
    )
except ImportError:  # the tests tree became a package
    from tests.llm.llm_cpu_fixtures import (  # noqa: F401
        SERVED_MODEL_NAME, llm_ray, smollm2_dir, vllm_cpu_config, vllm_cpu_pool, vllm_server,
    )

from ray_knowsim.model.chat import ChatRequest, ChatResponse
from ray_knowsim.model.outputs import SignalReport, UserTurn
from ray_knowsim.model.graph import IUGraph, build_index
from ray_knowsim.model.items import Item
from ray_knowsim.model.signals import normalize_signals
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.trajectory import run_trajectory
from ray_knowsim.sim.shard import run_shard
from ray_knowsim.sim.types import (
    RoleModels, RoleSettings, SessionResult, SessionSpec, ShardContext, ShardSpec, item_key,
)

pytestmark = [pytest.mark.llm_cpu, pytest.mark.slow]

MAX_TURNS = 2
MAX_TEXT_CHARS = 80  # per free-text JSON string: a short sentence
# Per-role output budgets that the bounded schemas fit in even when every character of every
# string is its own token (the degenerate case): UserTurn <= 2 strings, SignalReport <= 2 per IU.
ROLES = {
    "user_sim": RoleSettings(model="smol", temperature=0.7, max_tokens=256, attempts=1),
    # plain text: a reply cut at max_tokens is still a reply; short keeps the extractor's prompt small
    "assistant": RoleSettings(model="smol", temperature=0.0, max_tokens=128, attempts=1),
    "extractor": RoleSettings(model="smol", temperature=0.0, max_tokens=768, attempts=1),
}

ITEM = Item(id="frac-1", task="math", question="What is 3/4 + 1/8?",
            reference_answer="Write 3/4 as 6/8; then 6/8 + 1/8 = 7/8.")
GRAPH = IUGraph.model_validate({
    "nodes": [
        {"id": "IU1", "concept": "equivalent fractions", "abstraction_level": 0.7,
         "description": "Multiplying top and bottom by one number keeps a fraction's value."},
        {"id": "IU2", "concept": "common denominator", "abstraction_level": 0.4,
         "description": "Fractions are added once they share one denominator."},
        {"id": "IU3", "concept": "adding numerators", "abstraction_level": 0.2,
         "description": "Over one denominator, add the numerators and keep the denominator."},
    ],
    "edges": [{"from": "IU1", "to": "IU2"}, {"from": "IU2", "to": "IU3"}],
})
SPEC = SessionSpec(
    session_id="math/frac-1/novice/smol:minimal/0", task="math", item_id="frac-1",
    knowledge_level="novice", condition="smol:minimal", assistant_model="smol",
    assistant_strategy="minimal", simulator="structured", trial=0, seed=20261129, init_seed=7,
)
OUTPUT_MODELS = {"user_sim": UserTurn, "extractor": SignalReport}


def _cap_strings(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _cap_strings(v) for k, v in node.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out["maxLength"] = MAX_TEXT_CHARS
        return out
    if isinstance(node, list):
        return [_cap_strings(x) for x in node]
    return node


def bounded_schema(schema: dict, graph: IUGraph) -> dict:
    """``schema`` with capped strings; a SignalReport gets one entry per IU, in graph order."""
    out = _cap_strings(schema)
    listing = out.get("properties", {}).get("iu_analysis")
    if listing is not None:
        entry = listing.pop("items")
        pinned = []
        for node in graph.nodes:
            e = copy.deepcopy(entry)
            e["properties"]["id"] = {"type": "string", "const": node.id}
            e["properties"]["concept"] = {"type": "string", "const": node.concept}
            pinned.append(e)
        listing.update(prefixItems=pinned, items=False, minItems=len(pinned), maxItems=len(pinned))
    return out


@dataclass
class Call:
    request: ChatRequest
    response: ChatResponse


class Bounded:
    """Wraps a real ChatModel: tightens each request's schema (see the module docstring) and
    records every request/response pair for the checks."""

    def __init__(self, inner: Any, graph: IUGraph):
        self.inner, self.graph, self.name = inner, graph, inner.name
        self.calls: list[Call] = []

    async def complete(self, requests):
        sent = [replace(r, json_schema=bounded_schema(r.json_schema, self.graph))
                if r.json_schema is not None else r for r in requests]
        out = await self.inner.complete(sent)
        self.calls.extend(Call(q, r) for q, r in zip(sent, out))
        return out

    def log(self) -> str:
        return "\n".join(
            f"[{c.request.role}] {c.response.latency_s:.1f}s finish={c.response.finish_reason} "
            f"error={c.response.error} "
            f"tokens={c.response.usage.prompt_tokens}+{c.response.usage.completion_tokens}: "
            f"{c.response.text[:400]!r}" for c in self.calls)


def simulate(inner: Any) -> tuple[SessionResult, Bounded, float]:
    model = Bounded(inner, GRAPH)
    shard = ShardSpec("shard-llm-cpu", 0, (SPEC,), {item_key("math", ITEM.id): ITEM},
                      {item_key("math", ITEM.id): GRAPH})
    ctx = ShardContext(run_id="run-llm-cpu", config_hash="cfg", run_seed=1, rules=reference_rules(),
                       max_turns=MAX_TURNS, early_stop="virtual", graph_mode="strict", roles=ROLES)
    models = RoleModels(user_sim=model, extractor=model, assistants={"smol": model})

    async def collect():
        return [r async for r in run_shard(shard, models, ctx)]

    t = time.perf_counter()
    (result,) = asyncio.run(collect())
    return result, model, time.perf_counter() - t


def check(result: SessionResult, model: Bounded) -> None:
    s, log = result.session, model.log()
    assert s.status == "ok" and s.error is None, f"{s.error}\n{log}"
    assert s.turns == MAX_TURNS and s.stop_reason == "max_turns" and len(result.turns) == MAX_TURNS

    # every call answered, structured ones complete (not cut by max_tokens) and constrained
    by_role: dict[str, list[Call]] = {}
    for c in model.calls:
        by_role.setdefault(c.request.role, []).append(c)
    assert {r: len(cs) for r, cs in by_role.items()} == dict.fromkeys(ROLES, MAX_TURNS), log
    for role, calls in by_role.items():
        for c in calls:
            assert c.response.error is None, log
            assert c.response.usage.prompt_tokens > 0 and c.response.usage.completion_tokens > 0, log
            assert c.request.max_tokens == ROLES[role].max_tokens
            if role in OUTPUT_MODELS:
                assert c.request.schema_name == OUTPUT_MODELS[role].__name__
                assert c.response.finish_reason == "stop", f"{role} output truncated\n{log}"
                OUTPUT_MODELS[role].model_validate_json(c.response.text)  # the whole reply
            else:
                assert c.request.json_schema is None
    # one call per role per turn, no retries, and the row's token counts are the backend's
    assert s.llm_calls == len(ROLES) * MAX_TURNS
    for role, column in (("user_sim", "tokens_user_sim"), ("assistant", "tokens_assistant"),
                         ("extractor", "tokens_extractor")):
        assert getattr(s, column) == sum(c.response.usage.total for c in by_role[role]) > 0
    assert s.tokens_judge == 0 and s.iq is None

    ids = [n.id for n in GRAPH.nodes]
    for t, row in enumerate(result.turns, 1):
        assert row.turn == t and row.user_message.strip() and row.assistant_message.strip()
        entries = json.loads(row.signals_json)
        assert [e["id"] for e in entries] == ids, row.signals_json
        for e in entries:
            assert e["teaching_quality"] in ("well_explained", "shallow", "not_mentioned")
            assert e["user_attempt_type"] in ("reasoning", "articulation", "none")
        assert len(row.states) == len(ids) and all(0 <= v <= 3 for v in row.states)
    # the user message the assistant saw is the simulator's "message" field, as sent
    for row, c in zip(result.turns, by_role["user_sim"]):
        assert row.user_message == json.loads(c.response.text)["message"].strip()

    # the real model's signals through the plain-Python rules give the kernel's trajectory
    g = build_index(GRAPH, ITEM.id)
    signals = [normalize_signals(json.loads(row.signals_json)) for row in result.turns]
    traj = run_trajectory(g, dict(zip(g.ids, s.initial_states)), signals, reference_rules(),
                          max_turns=MAX_TURNS)
    assert [[u.post[v] for v in g.ids] for u in traj.updates] == [row.states for row in result.turns]
    assert s.kg is not None


def test_simulation_over_vllm_openai_server(vllm_server):
    from ray_knowsim.llm.http_backend import HTTPModelConfig, OpenAICompatibleModel

    inner = OpenAICompatibleModel(HTTPModelConfig(
        base_url=vllm_server, model=SERVED_MODEL_NAME, timeout_s=900, max_attempts=2))
    assert inner.config.structured_output == "json_schema"  # the default under test
    result, model, wall = simulate(inner)
    check(result, model)
    body = inner.build_payload(next(c.request for c in model.calls if c.request.role == "extractor"))
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["iu_analysis"]["maxItems"] == 3
    print(f"\n[llm_cpu] server simulation: {wall:.1f} s\n{model.log()}")


def test_simulation_over_vllm_actor_pool(vllm_cpu_config, vllm_cpu_pool):
    from ray_knowsim.engine.vllm.pool import VLLMActorModel

    result, model, wall = simulate(VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool))
    check(result, model)
    print(f"\n[llm_cpu] actor simulation: {wall:.1f} s\n{model.log()}")
