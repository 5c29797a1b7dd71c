"""Disk response cache: hits skip the server, keys separate what must differ, writers don't clash."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from ray_knowsim.llm.cache import CachedModel, ResponseCache, cache_key, is_cacheable
from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import HTTPModelConfig
from ray_knowsim.llm.protocol import generate_all
from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.server import serve_model_in_thread


class CountingModel:
    """Answers with a counter so a second real call is visible in the text too."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, r: ChatRequest) -> ChatResponse:
        self.calls += 1
        if r.messages[-1]["content"] == "fail":
            return ChatResponse(text="", error="model_error")
        return ChatResponse(text=f"answer #{self.calls}", usage=Usage(20, 4), finish_reason="stop")


def req(text: str = "hi", **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), **kw)


def accept(responses: list[ChatResponse]) -> list[ChatResponse]:
    """What a reader does with answers it parsed: let the cache store them."""
    for r in responses:
        if r.commit is not None:
            r.commit()
    return responses


def test_repeated_request_is_served_from_disk_over_http(tmp_path: Path):
    backend = CountingModel()
    with serve_model_in_thread(backend) as server:
        http = OpenAICompatibleModel(HTTPModelConfig(base_url=server.base_url, model="counting", max_attempts=1))
        model = CachedModel(http, ResponseCache(tmp_path / "cache"))
        [first] = accept(asyncio.run(generate_all(model, [req(prompt_version="user_sim@1")])))
        [again] = asyncio.run(generate_all(model, [req(prompt_version="user_sim@1", request_id="other-id")]))
        # a new cache object on the same folder (another worker, or a resumed run) sees it too
        fresh = CachedModel(http, ResponseCache(tmp_path / "cache"))
        [third] = asyncio.run(generate_all(fresh, [req(prompt_version="user_sim@1")]))
    assert backend.calls == 1
    assert first.text == again.text == third.text == "answer #1"
    assert not first.cached and first.usage == Usage(20, 4)
    assert again.cached and again.usage == Usage() and again.original_usage == Usage(20, 4)
    assert again.finish_reason == "stop" and third.cached


def test_keys_separate_everything_that_decides_the_answer():
    base = req(temperature=0.0, prompt_version="a@1")
    ident = {"name": "m"}
    k = cache_key(ident, base)
    variants = [
        replace(base, temperature=0.5, seed=1),
        replace(base, seed=3),
        replace(base, prompt_version="a@2"),
        replace(base, messages=({"role": "user", "content": "other"},)),
        replace(base, json_schema={"type": "object"}),
        replace(base, max_tokens=5),
        replace(base, role="judge"),
    ]
    keys = {cache_key(ident, v) for v in variants}
    assert k not in keys and len(keys) == len(variants)
    assert cache_key({"name": "other"}, base) != k
    assert cache_key(ident, replace(base, request_id="zzz")) == k
    assert cache_key(ident, replace(base, temperature=0)) == k  # 0 and 0.0 are one key


def test_sampling_without_seed_is_never_cached(tmp_path: Path):
    inner = CountingModel()
    model = CachedModel(inner, ResponseCache(tmp_path))
    hot = req(temperature=0.7)
    seeded = req(temperature=0.7, seed=11)
    assert not is_cacheable(hot) and is_cacheable(seeded)
    a = asyncio.run(generate_all(model, [hot]))[0]
    b = asyncio.run(generate_all(model, [hot]))[0]
    assert a.text != b.text and not b.cached and inner.calls == 2
    c = accept(asyncio.run(generate_all(model, [seeded])))[0]
    d = asyncio.run(generate_all(model, [seeded]))[0]
    assert c.text == d.text and d.cached and inner.calls == 3
    assert len(ResponseCache(tmp_path)) == 1


def test_errors_and_empty_answers_are_not_stored_and_batch_twins_go_once(tmp_path: Path):
    inner = CountingModel()
    cache = ResponseCache(tmp_path)
    model = CachedModel(inner, cache)
    out = accept(asyncio.run(generate_all(model, [req("fail"), req("x"), req("x"), req("fail")])))
    assert inner.calls == 2  # identical requests in one batch go out once ("fail" too)
    assert [r.error for r in out] == ["model_error", None, None, "model_error"]
    assert out[2].cached and out[2].text == out[1].text and out[2].usage == Usage()
    assert out[2].original_usage == Usage(20, 4)
    assert not out[3].cached and out[3].usage == Usage()  # a copied failure is not a hit
    assert len(cache) == 1
    assert not cache.put("k", ChatResponse(text=""))  # empty: a retry should reach the model
    assert not cache.put("k", ChatResponse(text="t", error="timeout"))


def test_only_accepted_untruncated_answers_are_stored(tmp_path: Path):
    class Cut(CountingModel):
        async def generate(self, q):
            r = await super().generate(q)
            return replace(r, finish_reason="length") if q.messages[-1]["content"] == "long" else r

    inner = Cut()
    cache = ResponseCache(tmp_path)
    model = CachedModel(inner, cache)
    refused, cut = asyncio.run(generate_all(model, [req("refused"), req("long")]))
    assert refused.commit is not None and cut.commit is None  # a truncated answer cannot be stored
    assert len(cache) == 0  # nothing is written before the reader accepts
    again = asyncio.run(generate_all(model, [req("refused")]))[0]
    assert not again.cached and inner.calls == 3  # the refused answer was never cached: asked again
    assert not cache.put("k", ChatResponse(text="t", finish_reason="length"))
    assert again.commit() and len(cache) == 1


def test_cache_files_hold_no_request_text(tmp_path: Path):
    model = CachedModel(CountingModel(), ResponseCache(tmp_path))
    accept(asyncio.run(generate_all(model, [req("my private question")])))
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("*.jsonl"))
    assert b"my private question" not in blob and b"answer #1" in blob


def test_torn_and_garbage_lines_are_skipped(tmp_path: Path):
    cache = ResponseCache(tmp_path)
    key = cache_key({"name": "m"}, req())
    cache.put(key, ChatResponse(text="kept", usage=Usage(1, 1)))
    (tmp_path / "crashed-writer.jsonl").write_bytes(b'not json\n{"key": "abc", "text": "half')
    reader = ResponseCache(tmp_path)
    assert reader.get(key).text == "kept"
    assert reader.get("abc") is None and reader.bad_lines == 1


_WRITER = textwrap.dedent(
    """
    import sys
    from ray_knowsim.llm.cache import ResponseCache
    from ray_knowsim.model.chat import ChatResponse, Usage
    cache = ResponseCache(sys.argv[1])
    tag = sys.argv[2]
    for i in range(200):
        cache.put(f"{tag}-{i}", ChatResponse(text=f"{tag} text {i} " + "x" * 500, usage=Usage(i, 1)))
        if i == 100:
            print("seen", len(cache), flush=True)
    """
)


def test_concurrent_writer_processes(tmp_path: Path):
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), tag], stdout=subprocess.PIPE, text=True)
        for tag in ("a", "b", "c")
    ]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0, out
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == 3  # one file per writer
    for f in files:
        for line in f.read_bytes().splitlines():
            json.loads(line)  # no interleaved or torn lines
    reader = ResponseCache(tmp_path)
    assert len(reader) == 600 and reader.bad_lines == 0
    hit = reader.get("b-123")
    assert hit.text.startswith("b text 123 ") and hit.original_usage == Usage(123, 1)


def test_reader_picks_up_other_writers_lines_on_a_miss(tmp_path: Path):
    reader = ResponseCache(tmp_path)
    writer = ResponseCache(tmp_path)
    assert reader.get("late") is None
    writer.put("late", ChatResponse(text="arrived", usage=Usage(2, 2)))
    assert reader.get("late").text == "arrived"


def test_accounting_counts_spend_hits_and_errors_per_role_and_merges(tmp_path: Path):
    from ray_knowsim.llm.accounting import AccountedModel, Accounting

    shard_a = AccountedModel(CachedModel(CountingModel(), ResponseCache(tmp_path)))
    accept(asyncio.run(generate_all(shard_a, [req("q", role="judge"), req("fail", role="judge"), req("u", role="user_sim")])))
    asyncio.run(generate_all(shard_a, [req("q", role="judge")]))  # a hit: no new spend
    judge = shard_a.accounting.by_role["judge"]
    assert (judge.calls, judge.errors, judge.cached) == (3, 1, 1)
    assert (judge.prompt_tokens, judge.completion_tokens) == (20, 4)
    assert (judge.saved_prompt_tokens, judge.saved_completion_tokens) == (20, 4)
    assert judge.error_kinds == {"model_error": 1}

    shard_b = Accounting()
    shard_b.role("judge").record(ChatResponse(text="", error="http_400:context_length_exceeded", latency_s=0.5))
    total = Accounting.merged([Accounting.from_dict(shard_a.accounting.to_dict()), shard_b])
    assert total.by_role["judge"].calls == 4 and total.by_role["judge"].error_kinds == {"model_error": 1, "http_400": 1}
    assert total.total().total_tokens == 48 and total.by_role["user_sim"].calls == 1
    assert Accounting.merged([shard_b, shard_a.accounting]).to_dict() == total.to_dict()  # order-free
