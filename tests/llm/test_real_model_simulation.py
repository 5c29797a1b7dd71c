"""A real (tiny) model through the whole turn loop: one structured session, two turns, run by
``run_shard`` with SmolLM2-135M in every role, once over the vLLM OpenAI server
(``OpenAICompatibleModel``, json_schema constrained decoding) and once over the Ray actor backend
(``VLLMActorModel``). Marker ``llm_cpu``: skipped outside .venv-llm or without the model.

It checks what a fake model cannot: the product's own strict schemas, sent unchanged, keep a
135M decoder inside the method's format. The extractor's schema is built per request from the
graph (one slot per IU with ``const`` id and concept, label enums). From prompt set v3 on no
schema bounds free text (``schema/outputs.py``: a bound would cut a thought or a rationale
mid-sentence), so a model that rambles inside a string runs into ``max_tokens`` and gets one retry
with the whole budget (``sim/ask.py``). ``Recorder`` only records what was sent
and received; it changes nothing. Retries, truncations and refused answers are allowed (they are
part of the product) but must be counted truly in the session row.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.doubles.llm_cpu import (  # noqa: F401  (pytest finds fixtures by name)
    GRAPH, ITEM, SERVED_MODEL_NAME, llm_ray, smollm2_dir, vllm_cpu_config, vllm_cpu_pool, vllm_server,
)

from ray_knowsim.llm.recording import Call, RecordingModel as Recorder
from ray_knowsim.schema.outputs import SignalReport, UserTurn, signal_report_schema
from ray_knowsim.schema.graph import build_index
from ray_knowsim.schema.signals import normalize_signals
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.trajectory import run_trajectory
from ray_knowsim.sim.shard import run_shard
from ray_knowsim.sim.types import (
    RoleModels, RoleSettings, SessionResult, SessionSpec, ShardContext, ShardSpec, item_key,
)

pytestmark = [pytest.mark.llm_cpu, pytest.mark.slow]

MAX_TURNS = 2
# max_tokens is each role's cap: the first call gets half of it (the extractor a per-graph
# estimate, 512 + 256 per IU), a truncated answer one retry at the cap (sim/ask.py). Measured with
# prompt set v3 (no text bounds): SmolLM2's answers here stay well inside these caps.
ROLES = {
    "user_sim": RoleSettings(model="smol", temperature=0.7, max_tokens=768, attempts=2),
    # plain text: a reply cut at max_tokens is still a reply; short keeps the extractor's prompt small
    "assistant": RoleSettings(model="smol", temperature=0.0, max_tokens=128, attempts=1),
    "extractor": RoleSettings(model="smol", temperature=0.0, max_tokens=2048, attempts=2, repair_temperature=0.4),
}

SPEC = SessionSpec(
    session_id="math/frac-1/novice/smol:minimal/0", task="math", item_id="frac-1",
    knowledge_level="novice", condition="smol:minimal", assistant_model="smol",
    assistant_strategy="minimal", simulator="structured", trial=0, seed=20261129, init_seed=7,
)
OUTPUT_MODELS = {"user_sim": UserTurn, "extractor": SignalReport}


def simulate(inner: Any, max_turns: int = MAX_TURNS) -> tuple[SessionResult, Recorder, float]:
    model = Recorder(inner)
    shard = ShardSpec("shard-llm-cpu", 0, (SPEC,), {item_key("math", ITEM.id): ITEM},
                      {item_key("math", ITEM.id): GRAPH})
    ctx = ShardContext(run_id="run-llm-cpu", config_hash="cfg", rules=reference_rules(),
                       max_turns=max_turns, early_stop="virtual", roles=ROLES)
    models = RoleModels(user_sim=model, extractor=model, assistants={"smol": model})

    async def collect():
        return [r async for r in run_shard(shard, models, ctx)]

    t = time.perf_counter()
    (result,) = asyncio.run(collect())
    return result, model, time.perf_counter() - t


def check(result: SessionResult, model: Recorder, max_turns: int = MAX_TURNS) -> None:
    s, log = result.session, model.log()
    assert s.status == "ok" and s.error is None, f"{s.error}\n{log}"
    assert s.turns == max_turns and s.stop_reason == "max_turns" and len(result.turns) == max_turns

    # the product's schemas went out unchanged: per request for the extractor, bounded for the learner
    by_request: dict[str, list[Call]] = {}
    for c in model.calls:
        by_request.setdefault(c.request.request_id, []).append(c)
        assert c.response.error is None, log
        assert c.response.usage.prompt_tokens > 0 and c.response.usage.completion_tokens > 0, log
        assert c.request.max_tokens <= ROLES[c.request.role].max_tokens
        if c.request.role == "extractor":
            assert c.request.json_schema == signal_report_schema(GRAPH) and c.request.schema_name == "SignalReport"
        elif c.request.role == "user_sim":
            assert c.request.json_schema == UserTurn.json_schema() and c.request.schema_name == "UserTurn"
        else:
            assert c.request.json_schema is None
    roles = [calls[0].request.role for calls in by_request.values()]
    assert sorted(roles) == sorted(list(ROLES) * max_turns), log  # one request per role and turn
    for calls in by_request.values():
        assert len(calls) <= ROLES[calls[0].request.role].attempts, log
        last = calls[-1]  # the accepted answer
        if last.request.role in OUTPUT_MODELS:
            OUTPUT_MODELS[last.request.role].model_validate_json(last.response.text)  # the whole reply

    # the row's counts are true: every call reached the model, truncations and refusals as seen
    assert s.llm_calls == len(model.calls) and s.llm_cache_hits == 0, log
    assert s.llm_truncations == sum(c.response.finish_reason == "length" for c in model.calls), log
    refusals = [r for row in result.turns for r in json.loads(row.extractor_refusals)]
    assert s.extractor_refusals == len(refusals)
    assert s.extractor_repairs == sum(len(json.loads(row.extractor_repairs)) for row in result.turns)
    for role, column in (("user_sim", "tokens_user_sim"), ("assistant", "tokens_assistant"),
                         ("extractor", "tokens_extractor")):
        assert getattr(s, column) == sum(c.response.usage.total for c in model.calls if c.request.role == role) > 0
    assert s.tokens_judge is None and s.iq is None  # the judge runs later, as a stage of its own

    ids = [n.id for n in GRAPH.nodes]
    for t, row in enumerate(result.turns, 1):
        assert row.turn == t and row.user_message.strip() and row.assistant_message.strip()
        entries = json.loads(row.signals_json)
        assert [e["id"] for e in entries] == ids, row.signals_json
        for e in entries:
            assert e["teaching_quality"] in ("well_explained", "shallow", "not_mentioned")
            assert e["user_attempt_type"] in ("reasoning", "articulation", "none")
        assert len(row.states) == len(ids) and all(0 <= v <= 3 for v in row.states)
    # the user message the assistant saw is the accepted simulator answer's "message" field
    accepted_user = [calls[-1] for calls in by_request.values() if calls[0].request.role == "user_sim"]
    for row, c in zip(result.turns, accepted_user):
        assert row.user_message == json.loads(c.response.text)["message"].strip()

    # the real model's signals through the plain-Python rules give the kernel's trajectory
    g = build_index(GRAPH, ITEM.id)
    signals = [normalize_signals(json.loads(row.signals_json)) for row in result.turns]
    traj = run_trajectory(g, dict(zip(g.ids, s.initial_states)), signals, reference_rules(),
                          max_turns=max_turns)
    assert [[u.post[v] for v in g.ids] for u in traj.updates] == [row.states for row in result.turns]
    assert s.kg is not None


def summary(s) -> str:
    return (f"calls {s.llm_calls}, truncations {s.llm_truncations}, extractor repairs {s.extractor_repairs}, "
            f"refusals {s.extractor_refusals}")


def test_simulation_over_vllm_openai_server(vllm_server):
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig

    inner = OpenAICompatibleModel(HTTPModelConfig(
        base_url=vllm_server, model=SERVED_MODEL_NAME, timeout_s=900, max_attempts=2))
    assert inner.config.structured_output == "json_schema"  # the default under test
    result, model, wall = simulate(inner)
    check(result, model)
    body = inner.build_payload(next(c.request for c in model.calls if c.request.role == "extractor"))
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == signal_report_schema(GRAPH)
    print(f"\n[llm_cpu] server simulation: {wall:.1f} s; {summary(result.session)}\n{model.log()}")


def test_simulation_over_vllm_actor_pool(vllm_cpu_config, vllm_cpu_pool):
    from ray_knowsim.backends.vllm.pool import VLLMActorModel

    # one turn: what this test adds to the server's is the actor transport; the turns' loop (carry-
    # forward, the second turn's prompts) is the server test's, and costs minutes per turn here
    result, model, wall = simulate(VLLMActorModel(vllm_cpu_config, actors=vllm_cpu_pool), max_turns=1)
    check(result, model, max_turns=1)
    print(f"\n[llm_cpu] actor simulation: {wall:.1f} s; {summary(result.session)}\n{model.log()}")
