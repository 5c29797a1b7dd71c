"""The response cache: one folder per unit (a shard), read once, written by a thread; a key that
covers what changes an answer (endpoint, model, output mode, request) and nothing that does not
(timeouts, limits); only accepted answers stored."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from dataclasses import fields, replace
from pathlib import Path

import pytest

from ray_knowsim.llm.cache import (
    REQUEST_FIELDS,
    REQUEST_IGNORED,
    CachedModel,
    ResponseCache,
    cache_key,
    is_cacheable,
    unit_folder,
)
from ray_knowsim.llm.http.client import OpenAICompatibleModel
from ray_knowsim.llm.http.config import ANSWER_FIELDS, OPERATIONAL_FIELDS, HTTPModelConfig
from ray_knowsim.llm.offline.server import serve_model_in_thread
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from tests.doubles.model_calls import run as run_and_close


class CountingModel:
    """Answers with a counter (and its tag) so a second real call is visible in the text too."""

    name = "counting"

    def __init__(self, tag: str = "") -> None:
        self.calls = 0
        self.tag = tag

    async def generate(self, r: ChatRequest) -> ChatResponse:
        self.calls += 1
        if r.messages[-1]["content"] == "fail":
            return ChatResponse(text="", error="model_error")
        return ChatResponse(text=f"{self.tag}answer #{self.calls}", usage=Usage(20, 4), finish_reason="stop")


def req(text: str = "hi", **kw) -> ChatRequest:
    return ChatRequest(messages=({"role": "user", "content": text},), **kw)


def accept(responses: list[ChatResponse]) -> list[ChatResponse]:
    """What a reader does with answers it parsed: let the cache store them."""
    for r in responses:
        if r.commit is not None:
            r.commit()
    return responses


#: all answers, then the model closed (its HTTP session, the cache's writer: both reopen on use)
ask = run_and_close


def http(base_url: str, **kw) -> OpenAICompatibleModel:
    kw.setdefault("max_attempts", 1)
    return OpenAICompatibleModel(HTTPModelConfig(base_url=base_url, model="counting", **kw))


def test_a_unit_answers_from_memory_and_a_resumed_unit_reads_its_own_files(tmp_path: Path):
    backend = CountingModel()
    with serve_model_in_thread(backend) as server:
        model = CachedModel(http(server.base_url), ResponseCache(unit_folder(tmp_path, "shard-000001")))
        [first] = accept(ask(model, [req(prompt_version="user_sim@1")]))
        [again] = ask(model, [req(prompt_version="user_sim@1", request_id="other-id")])
        asyncio.run(model.aclose())  # the writer thread drains
        # the shard again (a Ray retry, a resumed run): its folder is read, the answer is a hit
        resumed = CachedModel(http(server.base_url), ResponseCache(unit_folder(tmp_path, "shard-000001")))
        [third] = ask(resumed, [req(prompt_version="user_sim@1")])
        # another shard never reads that folder
        other = CachedModel(http(server.base_url), ResponseCache(unit_folder(tmp_path, "shard-000002")))
        [fourth] = ask(other, [req(prompt_version="user_sim@1")])
    assert backend.calls == 2 and fourth.text == "answer #2" and not fourth.cached
    assert first.text == again.text == third.text == "answer #1"
    assert not first.cached and first.usage == Usage(20, 4)
    assert again.cached and again.usage == Usage() and again.original_usage == Usage(20, 4)
    assert again.finish_reason == "stop" and third.cached
    assert [p.parent.name for p in tmp_path.rglob("*.jsonl")] == ["shard-000001"]


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
        replace(base, schema_name="Other"),
        replace(base, max_tokens=5),
        replace(base, role="judge"),
    ]
    keys = {cache_key(ident, v) for v in variants}
    assert k not in keys and len(keys) == len(variants)
    assert cache_key({"name": "other"}, base) != k
    assert cache_key(ident, replace(base, request_id="zzz", offline_facts={"x": 1})) == k
    assert cache_key(ident, replace(base, temperature=0)) == k  # 0 and 0.0 are one key


def test_every_field_is_decided_on_once_for_the_key_and_the_config_hash():
    """One list per kind: a request field, an endpoint setting or a vLLM setting is either part of
    what decides an answer or operational, never both, never neither; and the config hash (the
    backends' operational sets) follows the same lists."""
    from ray_knowsim.backends.registry import ALWAYS_OPERATIONAL, BACKENDS
    from ray_knowsim.backends.vllm.config import OPERATIONAL_FIELDS as VLLM_OPERATIONAL
    from ray_knowsim.backends.vllm.config import VLLMModelConfig

    assert set(REQUEST_FIELDS) | set(REQUEST_IGNORED) == {f.name for f in fields(ChatRequest)}
    assert not set(REQUEST_FIELDS) & set(REQUEST_IGNORED)
    assert set(ANSWER_FIELDS) | set(OPERATIONAL_FIELDS) == set(HTTPModelConfig.model_fields)
    assert not set(ANSWER_FIELDS) & set(OPERATIONAL_FIELDS)
    assert set(VLLM_OPERATIONAL) < set(VLLMModelConfig.model_fields)
    assert BACKENDS.get("http").operational == set(OPERATIONAL_FIELDS) | ALWAYS_OPERATIONAL
    assert BACKENDS.get("vllm").operational == set(VLLM_OPERATIONAL) | ALWAYS_OPERATIONAL
    vllm = VLLMModelConfig(model="/m", engine_kwargs={"hf_token": "s3cret"})
    ident = vllm.answer_identity()
    assert "replicas" not in ident and ident["model"] == "/m" and "s3cret" not in json.dumps(ident)
    assert vllm.model_copy(update={"replicas": 4, "restart_wait_s": 5}).answer_identity() == ident
    assert vllm.model_copy(update={"dtype": "float16"}).answer_identity() != ident


def test_two_endpoints_serving_one_model_name_never_share_answers(tmp_path: Path):
    one, two = CountingModel("one: "), CountingModel("two: ")
    cache = ResponseCache(tmp_path)
    with serve_model_in_thread(one) as s1, serve_model_in_thread(two) as s2:
        a = accept(ask(CachedModel(http(s1.base_url), cache), [req("q"), req("r")]))
        b = accept(ask(CachedModel(http(s2.base_url), cache), [req("q"), req("r")]))
        # the same endpoint again: its own answers come back
        c = ask(CachedModel(http(s1.base_url), cache), [req("q"), req("r")])
        # what the endpoint is told to return (output mode, schema subset) is part of the identity too
        d = ask(CachedModel(http(s1.base_url, structured_output="json_object"), cache), [req("q")])
    assert sorted(r.text for r in a) == ["one: answer #1", "one: answer #2"]
    assert sorted(r.text for r in b) == ["two: answer #1", "two: answer #2"] and not any(r.cached for r in b)
    assert [r.text for r in c] == [r.text for r in a] and all(r.cached for r in c)
    assert not d[0].cached and one.calls == 3 and two.calls == 2


def test_changing_a_timeout_a_limit_or_a_header_keeps_every_cache_hit(tmp_path: Path):
    backend = CountingModel()
    cache = ResponseCache(tmp_path)
    requests = [req(str(i), temperature=0.7, seed=i) for i in range(5)]
    with serve_model_in_thread(backend) as server:
        first = accept(ask(CachedModel(http(server.base_url, timeout_s=5, max_in_flight=2), cache), requests))
        tuned = http(server.base_url, timeout_s=300, connect_timeout_s=3, max_attempts=6, max_in_flight=64,
                     send_knowsim_headers=True, api_key_header="X-Other")
        again = ask(CachedModel(tuned, cache), requests)
    assert backend.calls == 5 and all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first]


def test_sampling_without_seed_is_never_cached(tmp_path: Path):
    inner = CountingModel()
    model = CachedModel(inner, ResponseCache(tmp_path))
    hot = req(temperature=0.7)
    seeded = req(temperature=0.7, seed=11)
    assert not is_cacheable(hot) and is_cacheable(seeded)
    a = ask(model, [hot])[0]
    b = ask(model, [hot])[0]
    assert a.text != b.text and not b.cached and inner.calls == 2
    c = accept(ask(model, [seeded]))[0]
    d = ask(model, [seeded])[0]
    assert c.text == d.text and d.cached and inner.calls == 3
    model.cache.close()
    assert len(ResponseCache(tmp_path)) == 1


def test_errors_and_empty_answers_are_not_stored_and_in_flight_twins_go_once(tmp_path: Path):
    inner = CountingModel()
    cache = ResponseCache(tmp_path)
    model = CachedModel(inner, cache)
    out = accept(ask(model, [req("fail"), req("x"), req("x"), req("fail")]))
    assert inner.calls == 2  # identical requests in flight at once go out once ("fail" too)
    assert [r.error for r in out] == ["model_error", None, None, "model_error"]
    owner, twin = sorted(out[1:3], key=lambda r: r.cached)  # which one went out is a matter of timing
    assert not owner.cached and twin.cached and twin.text == owner.text and twin.usage == Usage()
    assert twin.original_usage == Usage(20, 4) and twin.commit is None
    fails = sorted(out[0::3], key=lambda r: r.usage.total)
    assert not any(r.cached for r in fails) and fails[0].usage == Usage()  # a copied failure is not a hit
    assert len(cache) == 1
    assert not cache.put("k", ChatResponse(text=""))  # empty: a retry should reach the model
    assert not cache.put("k", ChatResponse(text="t", error="timeout"))


def test_twins_issued_together_go_once_however_long_the_lookup_takes(tmp_path: Path):
    """The cache lookup is part of the in-flight unit: a twin whose lookup would have finished after
    the first request's whole answer (a slow disk, a loaded event loop) still shares that answer."""
    inner = CountingModel()
    cache = ResponseCache(tmp_path)
    delays = iter([0.0, 0.05, 0.0, 0.05])
    lookup = cache.aget

    async def slow_lookup(key):
        await asyncio.sleep(next(delays, 0.0))
        return await lookup(key)

    cache.aget = slow_lookup
    model = CachedModel(inner, cache)
    out = accept(ask(model, [req("fail"), req("fail"), req("x"), req("x")]))
    assert inner.calls == 2  # one "fail", one "x": the second of each waited for the first
    assert [r.error for r in out] == ["model_error", "model_error", None, None]
    assert sorted(r.cached for r in out[2:]) == [False, True] and len(cache) == 1


def test_only_accepted_untruncated_answers_are_stored(tmp_path: Path):
    class Cut(CountingModel):
        async def generate(self, q):
            r = await super().generate(q)
            return replace(r, finish_reason="length") if q.messages[-1]["content"] == "long" else r

    inner = Cut()
    cache = ResponseCache(tmp_path)
    model = CachedModel(inner, cache)
    refused, cut = ask(model, [req("refused"), req("long")])
    assert refused.commit is not None and cut.commit is None  # a truncated answer cannot be stored
    assert len(cache) == 0  # nothing is written before the reader accepts
    again = ask(model, [req("refused")])[0]
    assert not again.cached and inner.calls == 3  # the refused answer was never cached: asked again
    assert not cache.put("k", ChatResponse(text="t", finish_reason="length"))
    assert again.commit() and len(cache) == 1


def test_cache_files_hold_no_request_text(tmp_path: Path):
    model = CachedModel(CountingModel(), ResponseCache(tmp_path))
    accept(ask(model, [req("my private question")]))
    asyncio.run(model.aclose())
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("*.jsonl"))
    assert b"my private question" not in blob and b"answer #1" in blob


def test_no_file_io_on_the_event_loop_and_a_miss_reads_nothing(tmp_path: Path, monkeypatch):
    """The unit's files are read in a thread, once; lines are written by the writer thread; a miss
    after that touches no file (not even new lines of the same folder)."""
    seeded = ResponseCache(tmp_path)
    seeded.put("old", ChatResponse(text="from an earlier attempt", usage=Usage(1, 1)))
    seeded.close()
    where: dict[str, set[int]] = {"write": set(), "read": set()}

    class Watched(ResponseCache):
        def _write(self, path, lines):
            where["write"].add(threading.get_ident())
            return super()._write(path, lines)

    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda p: where["read"].add(threading.get_ident()) or real_read(p))
    cache = Watched(tmp_path)
    model = CachedModel(CountingModel(), cache)

    async def main():
        loop_thread = threading.get_ident()
        hit = await cache.aget("old")
        reads = len(where["read"])
        accept([await model.generate(req("new"))])
        (tmp_path / "someone-else.jsonl").write_bytes(b'{"key": "late", "text": "x", "usage": [1, 1]}\n')
        miss = await cache.aget("late")
        await model.aclose()
        return loop_thread, hit, reads, miss

    loop_thread, hit, reads, miss = asyncio.run(main())
    assert hit.text == "from an earlier attempt" and miss is None
    assert where["read"] and loop_thread not in where["read"] | where["write"]
    assert where["write"] and reads == len(where["read"])
    assert ResponseCache(tmp_path).get("late") is not None  # a later attempt of the unit reads it


def test_torn_and_garbage_lines_are_skipped(tmp_path: Path):
    cache = ResponseCache(tmp_path)
    key = cache_key({"name": "m"}, req())
    cache.put(key, ChatResponse(text="kept", usage=Usage(1, 1)))
    cache.close()
    (tmp_path / "crashed-writer.jsonl").write_bytes(b'not json\n{"key": "abc", "text": "half')
    reader = ResponseCache(tmp_path)
    assert reader.get(key).text == "kept"
    assert reader.get("abc") is None and reader.bad_lines == 2


_WRITER = textwrap.dedent(
    """
    import sys
    from ray_knowsim.llm.cache import ResponseCache
    from ray_knowsim.schema.chat import ChatResponse, Usage
    cache = ResponseCache(sys.argv[1])
    tag = sys.argv[2]
    for i in range(200):
        cache.put(f"{tag}-{i}", ChatResponse(text=f"{tag} text {i} " + "x" * 500, usage=Usage(i, 1)))
    cache.close()
    """
)


def test_writers_of_one_unit_each_write_their_own_file(tmp_path: Path):
    """Attempts of a unit that overlap (a worker presumed dead still writing) never share a file."""
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), tag], stdout=subprocess.PIPE, text=True)
             for tag in ("a", "b", "c")]
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


@pytest.mark.parametrize("unit", ["shard-000012", "score-v1/judge", "..", ""])
def test_unit_folders_stay_inside_the_cache_folder(tmp_path: Path, unit: str):
    folder = unit_folder(tmp_path, unit)
    assert folder.parent == tmp_path and folder.name not in ("", ".", "..")


def test_accounting_counts_spend_hits_and_errors_per_role_and_merges(tmp_path: Path):
    from ray_knowsim.llm.accounting import AccountedModel, Accounting

    shard_a = AccountedModel(CachedModel(CountingModel(), ResponseCache(tmp_path)))
    accept(ask(shard_a, [req("q", role="judge"), req("fail", role="judge"), req("u", role="user_sim")]))
    ask(shard_a, [req("q", role="judge")])  # a hit: no new spend
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
