"""sim.ask: an unreadable answer gets ``attempts`` tries, each repair naming the latest complaint;
a truncated one its own retry with the role's whole budget; a seed per call, no resending of
transport failures, true counts, and only accepted answers in the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ray_knowsim.llm.cache import CachedModel, ResponseCache
from ray_knowsim.llm.parse import ParseResult
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.sim.ask import MIN_BUDGET, attempt_seed, first_budget
from ray_knowsim.sim.ask import ask as ask_one


class Script:
    """Answers request k of the whole conversation with ``replies[k]`` (text, finish_reason, error)."""

    name = "script"

    def __init__(self, replies):
        self.replies = list(replies)
        self.sent: list[ChatRequest] = []

    async def generate(self, r):
        self.sent.append(r)
        text, finish, error = self.replies.pop(0)
        return ChatResponse(text=text, usage=Usage(10, 2), finish_reason=finish, error=error)


def digits(text: str) -> ParseResult[int]:
    return ParseResult(value=int(text)) if text.isdigit() else ParseResult(error="user_sim_invalid_output", detail=f"{text!r} is not a number")


def req(**kw) -> ChatRequest:
    base = dict(messages=({"role": "user", "content": "n?"},), role="user_sim", temperature=0.7, seed=41, max_tokens=1000)
    base.update(kw)
    return ChatRequest(**base)


def ask(model, request, attempts=3, estimate=None):
    return asyncio.run(ask_one(model, request, digits, attempts=attempts, estimate=estimate))


def test_budget_and_seed_policy():
    assert first_budget(1000) == 500 and first_budget(300) == MIN_BUDGET and first_budget(100) == 100
    assert first_budget(8192, estimate=1280) == 1280 and first_budget(1000, estimate=5000) == 1000
    assert attempt_seed(41, 0) == 41 and attempt_seed(None, 2) is None
    seeds = {attempt_seed(41, k) for k in range(4)}
    assert len(seeds) == 4 and all(0 <= s < 2**31 - 1 for s in seeds)


def test_a_refused_answer_gets_attempts_tries_each_repair_naming_the_latest_complaint():
    model = Script([("many", "stop", None), ("7", "stop", None)])
    a = ask(model, req())
    assert a.ok and a.value == 7 and a.calls == 2 and a.tries == 2 and a.cache_hits == 0
    assert a.refusals == ["user_sim_invalid_output: 'many' is not a number"]
    first, retry = model.sent
    assert first.seed == 41 and retry.seed == attempt_seed(41, 1) != 41
    assert retry.messages[-2] == {"role": "assistant", "content": "many"} and "'many' is not a number" in retry.messages[-1]["content"]
    # refused on every try: exactly ``attempts`` calls, then the latest complaint names the failure
    for attempts in (2, 3, 5):
        model = Script([(w, "stop", None) for w in "abcdefg"])
        a = ask(model, req(), attempts=attempts)
        assert a.error == "user_sim_invalid_output" and a.detail == f"{'abcdefg'[attempts - 1]!r} is not a number"
        assert a.calls == a.tries == len(a.refusals) == len(model.sent) == attempts
        assert len({r.seed for r in model.sent}) == attempts  # every call samples anew
        for k, repair in enumerate(model.sent[1:]):  # the original request + the LATEST reply and complaint only
            assert repair.messages[:-2] == first.messages
            assert repair.messages[-2]["content"] == "abcdefg"[k] and f"{'abcdefg'[k]!r} is not a number" in repair.messages[-1]["content"]
    # transient drift: refused twice, then read; the session goes on
    model = Script([("x", "stop", None), ("y", "stop", None), ("4", "stop", None)])
    a = ask(model, req(), attempts=3)
    assert a.ok and a.value == 4 and len(a.refusals) == 2 and a.tries == 3


def test_the_repair_round_asks_at_the_roles_repair_temperature():
    model = Script([("many", "stop", None), ("7", "stop", None)])
    a = asyncio.run(ask_one(model, req(temperature=0.0), digits, attempts=3, repair_temperature=0.4))
    assert a.ok and [r.temperature for r in model.sent] == [0.0, 0.4]
    model = Script([("many", "stop", None), ("7", "stop", None)])
    ask(model, req(temperature=0.7))  # no setting: the repair keeps the request's temperature
    assert [r.temperature for r in model.sent] == [0.7, 0.7]


def test_a_truncated_answer_gets_its_own_retry_with_the_whole_budget():
    model = Script([('{"x": "lo', "length", None), ("12", "stop", None)])
    a = ask(model, req())
    assert a.ok and a.value == 12 and a.truncations == 1 and a.refusals == [] and a.calls == 2 and a.tries == 1
    assert [r.max_tokens for r in model.sent] == [500, 1000]
    assert model.sent[1].seed == attempt_seed(41, 1) and model.sent[1].messages == model.sent[0].messages
    # truncated again at the cap: a named failure
    model = Script([("{", "length", None), ("{", "length", None)])
    a = ask(model, req())
    assert a.error == "user_sim_truncated" and "max_tokens=1000" in a.detail and a.truncations == 2
    # no room to grow (first budget == cap): no retry; a parsable cut answer is kept and counted
    model = Script([("5", "length", None)])
    a = ask(model, req(max_tokens=200))
    assert a.ok and a.value == 5 and a.truncations == 1 and len(model.sent) == 1
    # the bump is not one of the tries: with attempts=2, cut + refused + read still succeeds, and
    # the repair keeps the whole budget
    model = Script([("{", "length", None), ("x", "stop", None), ("3", "stop", None)])
    a = ask(model, req(), attempts=2)
    assert a.ok and a.value == 3 and a.calls == 3 and a.tries == 2 and a.truncations == 1
    assert [r.max_tokens for r in model.sent] == [500, 1000, 1000]
    assert len({r.seed for r in model.sent}) == 3
    # ...and even with attempts=1 a short budget is not held against the answer
    model = Script([("{", "length", None), ("8", "stop", None)])
    assert ask(model, req(), attempts=1).value == 8 and len(model.sent) == 2


def test_attempts_one_means_no_repair_and_transport_failures_are_final():
    model = Script([("x", "stop", None)])
    assert ask(model, req(), attempts=1).error == "user_sim_invalid_output" and len(model.sent) == 1
    model = Script([("", None, "http_503")])
    a = ask(model, req())
    assert a.error == "user_sim_http_503" and a.calls == 0 and len(model.sent) == 1 and a.usage == Usage(10, 2)
    # a provider's error code is kept (it tells a conversation too long for the model from a bad
    # transport); free-text details are not part of the name
    from ray_knowsim.schema.failures import failure_class

    for error, named, kind in (("http_400:context_length_exceeded", "user_sim_http_400:context_length_exceeded", "model"),
                               ("http_400", "user_sim_http_400", "infra"),
                               ("vllm_engine_dead: engine core died", "user_sim_vllm_engine_dead", "infra"),
                               ("refusal", "user_sim_refusal", "model")):
        a = ask(Script([("", None, error)]), req())
        assert a.error == named and a.detail == error and failure_class(a.error) == kind


def test_only_accepted_answers_reach_the_cache_and_hits_are_not_calls(tmp_path: Path):
    cache = ResponseCache(tmp_path)
    model = CachedModel(Script([("many", "stop", None), ("7", "stop", None)]), cache)
    a = ask(model, req())
    assert a.ok and len(cache) == 1  # the refused "many" was not stored, the repaired "7" was
    again = ask(CachedModel(Script([("many", "stop", None)]), cache), req())
    assert again.refusals and again.value == 7 and again.calls == 1 and again.cache_hits == 1
    model = CachedModel(Script([("{", "length", None), ("3", "stop", None)]), ResponseCache(tmp_path / "t"))
    assert ask(model, req()).value == 3 and len(model.cache) == 1  # the truncated answer was not stored
