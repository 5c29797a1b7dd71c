"""Spend journals (io/spend.py): what a shard task writes as requests are answered, read back
and split into what the rows hold and what is apart; the cost table's whole row."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ray_knowsim.tables.cost import cost_table
from ray_knowsim.io.spend import SpendJournal, read_journal, read_journals, run_spend, session_of
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.schema.price import Price
from ray_knowsim.schema.results import ROLES
from ray_knowsim.sim.types import request_id

PRICES = {"m": Price(input=1.0, cached_input=0.5, output=2.0)}


def _ask(journal: SpendJournal, sid: str, role: str, prompt: int, completion: int, cached: int = 0, *,
         answered: bool = True, error: str | None = None, hit: bool = False, model: str = "m") -> None:
    req = ChatRequest(messages=({"role": "user", "content": "x"},), role=role, request_id=request_id(sid, role, 1))
    journal.sent(req, model)
    if answered:
        journal.answered(req, ChatResponse(text="a", usage=Usage(prompt, completion, cached), error=error, cached=hit), model)


def test_request_ids_name_their_session():
    assert session_of(request_id("math/i/novice/c/0", "assistant", 3)) == "math/i/novice/c/0"
    assert session_of("item7:graph") == ""


def test_journal_round_trip_counts_like_the_rows_and_survives_a_torn_line(tmp_path):
    j = SpendJournal(tmp_path, unit="shard-000001", config_hash="h", invocation=2, prices=PRICES)
    _ask(j, "s1", "assistant", 100, 10, 30)
    _ask(j, "s1", "user_sim", 50, 5)
    _ask(j, "s1", "assistant", 0, 0, hit=True)  # a cache hit: no request, no spend
    _ask(j, "s1", "extractor", 0, 0, error="http_503")  # failed in transport: not a model answer
    _ask(j, "s2", "assistant", 70, 7, answered=False)  # in flight when the process died
    j.committed(["s1"])
    j.close()
    with open(j.path, "a", encoding="utf-8") as fh:
        fh.write('{"s": "s2", "role": "assist')  # a crash mid-write
    got = read_journal(j.path)
    assert got is not None and got.token == j.token and got.invocation == 2
    s1 = got.spend["s1"]
    assert (s1.requests, s1.cache_hits, s1.errors, s1.prompt_tokens, s1.completion_tokens, s1.cached_prompt_tokens) == (2, 1, 1, 150, 15, 30)
    assert s1.cost_usd == pytest.approx(((100 - 30) * 1 + 30 * 0.5 + 10 * 2 + 50 * 1 + 5 * 2) / 1e6)
    assert s1.by_role["assistant"] == {"requests": 1, "prompt_tokens": 100, "completion_tokens": 10, "cached_prompt_tokens": 30}
    assert got.sent - got.answered == 1 and got.committed == {"s1"}
    assert [x.token for x in read_journals(tmp_path, "h")] == [j.token] and read_journals(tmp_path, "other") == []


def test_unpriced_spend_is_unknown_not_zero(tmp_path):
    j = SpendJournal(tmp_path, unit="shard-000001", config_hash="h", prices={})
    _ask(j, "s1", "assistant", 10, 1, model="nameless")
    j.close()
    assert read_journal(j.path).spend["s1"].cost_usd is None


def test_spend_splits_into_rows_cut_off_and_superseded(tmp_path):
    # invocation 0: s1 committed (its row counts), s2 committed then rerun later, s3 cut off
    a = SpendJournal(tmp_path, unit="shard-000000", config_hash="h", invocation=0, prices=PRICES)
    for sid in ("s1", "s2", "s3"):
        _ask(a, sid, "assistant", 100, 10)
    _ask(a, "s3", "user_sim", 40, 4, answered=False)
    a.committed(["s1", "s2"])
    a.close()
    # invocation 1: s2 rerun and s3 run again, both committed
    b = SpendJournal(tmp_path, unit="shard-000000", config_hash="h", invocation=1, prices=PRICES)
    for sid in ("s2", "s3"):
        _ask(b, sid, "assistant", 200, 20)
    b.committed(["s2", "s3"])
    b.close()
    # a scoring pass into a set the tables do not show
    c = SpendJournal(tmp_path, unit="score-other", kind="score", score_set="other", config_hash="h", invocation=1, prices=PRICES)
    _ask(c, "s1", "judge", 30, 3)
    c.committed(["s1"])
    c.close()
    counted = {("shard", "s1"): a.token, ("shard", "s2"): b.token, ("shard", "s3"): b.token}
    spend = run_spend(read_journals(tmp_path, "h"), counted, primary="main")
    assert spend.in_rows.prompt_tokens == 100 + 200 + 200 and spend.in_rows.sessions == {"s1", "s2", "s3"}
    assert spend.apart["superseded"].prompt_tokens == 100 and spend.apart["superseded"].sessions == {"s2"}
    assert spend.apart["uncommitted"].prompt_tokens == 100 and spend.apart["uncommitted"].sessions == {"s3"}
    assert spend.apart["other_score_sets"].prompt_tokens == 30
    assert spend.in_flight == 1
    assert spend.whole.requests == 3 + 2 + 1 and spend.whole.prompt_tokens == 500 + 100 + 100 + 30
    assert spend.by_invocation["0"].requests == 3 and spend.by_invocation["1"].requests == 3
    record = spend.to_dict()
    assert record["whole"]["requests"] == 6 and record["apart"]["uncommitted"]["sessions"] == 1


def _rows(n: int, prompt: int) -> pd.DataFrame:
    rows = [{"task": "math", "condition": "a", "status": "ok", "llm_calls": 3, "cost_usd": 0.001} for _ in range(n)]
    df = pd.DataFrame(rows)
    for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
        for r in ROLES:
            df[f"{kind}_{r}"] = prompt if (kind, r) == ("prompt_tokens", "assistant") else 0
    return df


def test_cost_table_whole_row_adds_what_is_apart(tmp_path):
    j = SpendJournal(tmp_path, unit="shard-000000", config_hash="h", prices=PRICES)
    _ask(j, "cut", "assistant", 1000, 100, 400)
    _ask(j, "cut", "user_sim", 10, 1, answered=False)
    j.close()
    spend = run_spend(read_journals(tmp_path), {}, primary=None)
    table = cost_table(_rows(2, 50), spend).set_index(["task", "condition"])
    assert list(table.index) == [("math", "a"), ("all", "uncommitted"), ("all", "all")]  # the whole stays last
    apart, whole = table.loc[("all", "uncommitted")], table.loc[("all", "all")]
    assert apart["requests"] == 1 and apart["prompt_tokens"] == 1000 and apart["cached_prompt_tokens"] == 400
    assert apart["prompt_tokens_assistant"] == 1000 and apart["n_sessions"] == 1 and apart["unanswered_requests"] == 1
    assert whole["requests"] == 6 + 1 and whole["prompt_tokens"] == 100 + 1000 and whole["unanswered_requests"] == 1
    assert whole["cost_usd"] == pytest.approx(0.002 + (600 + 200 + 200) / 1e6)
    unpriced = run_spend(read_journals(tmp_path), {}, primary=None)
    unpriced.apart["uncommitted"].unpriced = 1
    assert math.isnan(cost_table(_rows(2, 50), unpriced).iloc[-1]["cost_usd"])  # unknown, not a smaller number
    plain = cost_table(_rows(2, 50)).set_index(["task", "condition"])  # a run without journals: its rows only
    assert list(plain.index) == [("math", "a"), ("all", "all")] and plain.loc[("all", "all"), "requests"] == 6


def test_journal_lines_are_the_bytes_json_writes():
    """The journal's lines (orjson where it writes what json writes) are byte for byte
    ``json.dumps(separators=(",", ":"))`` and a newline, for the values a journal holds and for
    the ones orjson writes otherwise (exponent-form and non-finite floats, non-ASCII and control
    characters, ints beyond 64 bits), which go through json."""
    import json
    import math
    import random

    from ray_knowsim.io.spend import _line

    rng = random.Random(7)
    floats = [0.0, -0.0, 1e-4, 9.99e-5, 1e-5, 1.5e-7, 0.000123, 12.5, 1e15, 9.999e15, 1e16, 1.2e17, -3.25e-6,
              math.nan, math.inf, -math.inf, 1 / 3, 2.0**52 + 0.5]
    texts = ["demo-514b9bd3/math-0003-novice-t1-c2", "", "extractor", "caf\u00e9", "a\tb", "line\nbreak", 'q"uote',
             "back\\slash", "\x7f", "\u2028", "emoji \U0001f600", "sl/ash"]
    ints = [0, 1, -1, 3456, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**30]
    pool = floats + texts + ints + [None, True, False, [], ["a", "b"], ["caf\u00e9"], [1e-5]]
    for _ in range(3000):
        record = {f"k{j}": rng.choice(pool) for j in range(rng.randint(1, 6))}
        expected = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        assert _line(record) == expected, record
    assert json.loads(_line({"s": "x", "usd": 1.5e-7})) == {"s": "x", "usd": 1.5e-7}


def test_a_journal_reads_the_values_json_reads(tmp_path, monkeypatch):
    """Journal lines are decoded by orjson where it gives json's values: a journal with lines json
    alone reads (NaN, an integer outside 64 bits, a float of integer value), a torn last line and
    one that is no object reads exactly as with json.loads."""
    import dataclasses
    import json

    from ray_knowsim.io import spend as spend_module

    journal = SpendJournal(tmp_path, unit="shard-000000", config_hash="h")
    _ask(journal, request_id("s1", "assistant", 1), "assistant", 10, 5)
    journal.close()
    with open(journal.path, "a") as fh:
        fh.write('{"s":"s2","role":"judge","model":"m","calls":1,"prompt":123456789012345678901234,"completion":2,"usd":NaN}\n')
        fh.write('{"s":"s3","role":"judge","model":"m","calls":1,"prompt":3,"completion":1e3,"usd":1e20}\n')
        fh.write('[1, 2]\n{"committed": ["s1"]}\n{"s": "s4", "ro')  # not an object, a commit, a torn line
    fast = read_journal(journal.path)
    monkeypatch.setattr(spend_module, "loads_as_json", json.loads)
    slow = read_journal(journal.path)
    assert fast is not None and fast.answered == 3 and fast.committed == {"s1"}
    as_dicts = lambda j: {k: dataclasses.asdict(v) for k, v in j.spend.items()}  # noqa: E731
    assert (fast.header, fast.sent, fast.answered, fast.committed) == (slow.header, slow.sent, slow.answered, slow.committed)
    assert repr(as_dicts(fast)) == repr(as_dicts(slow))  # repr: NaN != NaN, and types count (int vs float)


def test_an_anthropic_answer_is_journaled_and_priced_with_its_cache_read_and_write(tmp_path):
    """The HTTP client reads Anthropic's usage fields; the journal keeps the written tokens and
    prices them at the write premium, the read ones at the cached price."""
    import json

    from ray_knowsim.llm.http.response import ResponseReader

    body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 900}}
    response = ResponseReader("claude", None).read(json.dumps(body).encode())
    assert (response.usage.prompt_tokens, response.usage.cached_prompt_tokens, response.usage.cache_write_tokens) == (4000, 3000, 900)
    price = Price(input=3.0, output=15.0, provider="anthropic")  # reads 0.1x, writes 1.25x input
    j = SpendJournal(tmp_path, unit="shard-000001", config_hash="h", prices={"claude": price})
    req = ChatRequest(messages=({"role": "user", "content": "x"},), role="extractor", request_id=request_id("s1", "extractor", 1))
    j.sent(req, "claude")
    j.answered(req, response, "claude")
    j.close()
    s1 = read_journal(j.path).spend["s1"]
    assert (s1.prompt_tokens, s1.cached_prompt_tokens, s1.cache_write_tokens) == (4000, 3000, 900)
    assert s1.cost_usd == pytest.approx((100 * 3.0 + 3000 * 0.3 + 900 * 3.75 + 10 * 15.0) / 1e6)


def _same(a, b) -> None:
    """Two readings of the journals hold the same spend, counts and commits."""
    assert [j.token for j in a] == [j.token for j in b]
    for x, y in zip(a, b):
        assert (x.sent, x.answered, x.committed, x.header) == (y.sent, y.answered, y.committed, y.header)
        assert {k: v.to_dict() for k, v in x.spend.items()} == {k: v.to_dict() for k, v in y.spend.items()}


def test_the_follower_reads_only_what_was_appended_and_equals_a_whole_reading(tmp_path):
    from ray_knowsim.io.spend import JournalFollower

    follower = JournalFollower(tmp_path, "h")
    assert follower.read() == []  # no spend folder yet
    a = SpendJournal(tmp_path, unit="shard-000001", config_hash="h", prices=PRICES)
    other = SpendJournal(tmp_path, unit="shard-000002", config_hash="another", prices=PRICES)
    _ask(other, "x", "assistant", 5, 5)
    _same(follower.read(), read_journals(tmp_path, "h"))  # a header alone; the other config's journal left out
    _ask(a, "s1", "assistant", 100, 10, 30)
    _ask(a, "s2", "user_sim", 50, 5, answered=False)
    _same(follower.read(), read_journals(tmp_path, "h"))
    b = SpendJournal(tmp_path, unit="shard-000003", config_hash="h", prices=PRICES)
    _ask(b, "s3", "extractor", 40, 4)
    a.committed(["s1"])
    _same(follower.read(), read_journals(tmp_path, "h"))
    with open(b.path, "a", encoding="utf-8") as fh:  # a line being written: it waits for its newline
        fh.write('{"s": "s3", "role": "assistant", "model": "m", "calls": 1, "cache_hits": 0, "errors": 0, "attempts": 1, ')
    before = follower.read()
    assert sum(j.answered for j in before) == 2
    with open(b.path, "a", encoding="utf-8") as fh:
        fh.write('"prompt": 7, "completion": 3, "cached_prompt": 0, "cache_write": 0, "reasoning": 0, "usd": 0.0}\n')
    after = follower.read()
    _same(after, read_journals(tmp_path, "h"))
    assert after[1].spend["s3"].requests == 2 and after[1].spend["s3"].prompt_tokens == 47
    # the follower parsed each line once: a reading with nothing new changes nothing
    _same(follower.read(), after)
    # a journal replaced by a shorter file is read afresh
    a.close()
    a.path.write_text(a.path.read_text(encoding="utf-8").splitlines(keepends=True)[0], encoding="utf-8")
    _same(follower.read(), read_journals(tmp_path, "h"))
    for j in (b, other):
        j.close()
