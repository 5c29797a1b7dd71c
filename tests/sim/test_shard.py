"""The simulation loop: kernel results equal the plain-Python rules, sessions are independent of
their shard-mates, and failures are explicit."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ray_knowsim.demo import demo_items
from ray_knowsim.schema.chat import ChatResponse, Usage
from ray_knowsim.schema.graph import build_index, parse_graph
from ray_knowsim.schema.signals import normalize_signals
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.trajectory import run_trajectory

from tests.doubles.sim_shard import context, offline_models, run, session, shard_of


@pytest.fixture(scope="module")
def items():
    return demo_items()


@pytest.fixture(scope="module")
def mixed_run(items):
    specs = [session(items[0], "novice", "comprehensive"), session(items[1], "advanced", "socratic"),
             session(items[-1], "intermediate", "adaptive"), session(items[0], "novice", "adaptive", "zero-shot-cot")]  # fmt: skip
    return specs, run(shard_of(specs), offline_models(), context(max_turns=3))


def test_every_session_comes_back_once_with_its_turns(mixed_run):
    specs, results = mixed_run
    assert [r.session.session_id for r in results] == [s.session_id for s in specs]
    for r in results:
        assert r.session.status == "ok", r.session.error
        assert len(r.turns) == r.session.turns and 1 <= r.session.turns <= 3
        assert r.session.llm_calls > 0 and r.session.tokens_user_sim > 0 and r.session.tokens_assistant > 0
        assert r.session.iq is None  # the judges are a stage of their own (ray_knowsim.score), not part of the loop
    structured = [r for r in results if r.session.simulator == "structured"]
    assert all(r.session.tokens_extractor > 0 and r.session.kg is not None for r in structured)
    baseline = results[-1].session
    assert baseline.kg is None and baseline.tokens_extractor == 0


def test_kernel_trajectory_equals_plain_python_rules(mixed_run):
    """Re-running each structured session's recorded signals through rules/ gives the same rows."""
    _, results = mixed_run
    for r in results:
        s = r.session
        if s.simulator != "structured":
            continue
        g = build_index(parse_graph(json.loads(s.graph_json), s.item_id), s.item_id)
        signals = [normalize_signals(json.loads(t.signals_json)) for t in r.turns]
        traj = run_trajectory(g, dict(zip(g.ids, s.initial_states)), signals, reference_rules(), max_turns=3)
        assert [list(u.post[v] for v in g.ids) for u in traj.updates] == [t.states for t in r.turns]
        assert [[u.carries[v] for v in g.ids] for u in traj.updates] == [t.carries for t in r.turns]
        summary = traj.summary(reference_rules())
        for key, value in summary.items():
            assert getattr(s, key) == pytest.approx(value, abs=1e-12) if isinstance(value, float) else getattr(s, key) == value


def test_same_seed_same_transcript_whatever_the_shard(items, mixed_run):
    specs, results = mixed_run
    alone = run(shard_of([specs[1]]), offline_models(), context(max_turns=3))[0]
    together = results[1]
    assert alone.session == together.session
    assert alone.turns == together.turns


class Garbling:
    """Wraps a model; answers a role's requests for one session with unreadable text."""

    def __init__(self, inner, role, session_id, *, transport_failures=0):
        self.inner, self.role, self.session_id, self.name = inner, role, session_id, "garbling"
        self.transport_failures = transport_failures
        self.calls = 0

    async def generate(self, req):
        out = await self.inner.generate(req)
        if req.role == self.role and req.request_id.startswith(self.session_id):
            self.calls += 1
            if self.transport_failures:
                self.transport_failures -= 1
                out = ChatResponse(text="", usage=Usage(5, 0), error="http_503")
            elif not self.transport_failures and self.role != "assistant":
                out = replace(out, text="I'd rather not answer in JSON today.")
        return out


def test_unreadable_extractor_output_fails_that_session_only_with_a_named_error(items):
    specs = [session(items[0], "novice", "socratic"), session(items[1], "novice", "socratic")]
    model = Garbling(offline_models().user_sim, "extractor", specs[0].session_id)
    results = run(shard_of(specs), offline_models(model), context(max_turns=2, attempts=2))
    bad, good = results[0].session, results[1].session
    assert bad.status == "failed" and bad.error == "extractor_invalid_json" and bad.kg is None
    assert model.calls == 2  # the first try plus one repair carrying the validation error
    assert good.status == "ok" and good.turns == 2


def test_transport_errors_are_not_resent_here_they_fail_with_the_reason(items):
    """The HTTP client retries 429/5xx/timeouts itself; what reaches the loop is final (one retry layer)."""
    for failures in (1, 10):
        spec = session(items[0], "novice", "socratic")
        model = Garbling(offline_models().user_sim, "assistant", spec.session_id, transport_failures=failures)
        [result] = run(shard_of([spec]), offline_models(model), context(max_turns=1, attempts=3))
        assert result.session.status == "failed" and result.session.error == "assistant_http_503"
        assert model.calls == 1


def test_stop_mode_ends_the_conversation_at_the_rules_stop(items):
    specs = [session(item, "novice", "comprehensive") for item in items]
    virtual_runs = run(shard_of(specs), offline_models(), context(max_turns=8))
    stopping = [(spec, r.session) for spec, r in zip(specs, virtual_runs) if r.session.early_stop_turn is not None]
    assert stopping, "the demo's comprehensive tutor should overload some novice"
    spec, virtual = stopping[0]
    assert virtual.turns == 8  # virtual mode records the stop but runs on
    stopped = run(shard_of([spec]), offline_models(), context(max_turns=8, early_stop="stop"))[0].session
    assert stopped.turns == virtual.early_stop_turn
    assert stopped.stop_reason == virtual.early_stop_reason


def test_sessions_of_an_item_share_one_index_and_write_what_own_indexes_write(items, monkeypatch):
    """One GraphIndex per item in a shard (the prompts' per-graph lines and the kernel's packed
    graphs are then made once per item): the rows are the ones a per-session index writes."""
    from ray_knowsim.schema.graph import build_index as fresh_index
    from ray_knowsim.sim import shard as shard_module
    from ray_knowsim.sim.session import shared_indexes

    index_of = shared_indexes()
    specs = [session(items[0], level, strategy) for level in ("novice", "advanced") for strategy in ("socratic", "adaptive")]
    specs += [session(items[1], "intermediate", "comprehensive")]
    shard = shard_of(specs)
    a, b, c = (index_of(shard.item_of(s), shard.graph_of(s)) for s in (specs[0], specs[3], specs[4]))
    assert a is b and a is not c
    assert a == fresh_index(shard.graph_of(specs[0]), specs[0].item_id)  # the same facts as its own index
    given = []  # (item id, index object) of each session run_shard starts
    start = shard_module.start_session
    monkeypatch.setattr(shard_module, "start_session",
                        lambda spec, item, graph, rules, index=None: given.append((item.id, index)) or start(spec, item, graph, rules, index))
    shared = run(shard, offline_models(), context(max_turns=3))
    assert len({id(ix) for item_id, ix in given if item_id == items[0].id}) == 1 and len({id(ix) for _, ix in given}) == 2
    monkeypatch.setattr(shard_module, "shared_indexes", lambda: lambda item, graph: fresh_index(graph, item.id))
    own = run(shard, offline_models(), context(max_turns=3))
    assert [r.session for r in shared] == [r.session for r in own]
    assert [r.turns for r in shared] == [r.turns for r in own]
