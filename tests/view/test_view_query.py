"""Server-side filtering, sorting and paging of session rows, and run status: pure logic, checked
against pandas on the same rows (no hard-coded results)."""

from __future__ import annotations

import math
import random

import pandas as pd
import pyarrow as pa
import pytest

from pathlib import Path

from ray_knowsim.io.rundir import RunStatus, manifest_facts
from ray_knowsim.view.discover import run_status
from ray_knowsim.view.query import (
    MAX_PER_PAGE,
    error_kind,
    facets,
    failure_counts,
    neighbours,
    page_of,
    parse_query,
    select,
)


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    rng = random.Random(11)
    out = []
    for k in range(437):
        failed = rng.random() < 0.15
        out.append({
            "session_id": f"t/item{k % 9}/{rng.choice(['novice', 'intermediate', 'advanced'])}/c{k % 4}/{k}",
            "task": rng.choice(["math", "expertqa"]),
            "item_id": f"item{k % 9}",
            "knowledge_level": rng.choice(["novice", "intermediate", "advanced"]),
            "condition": f"c{k % 4}",
            "status": "failed" if failed else "ok",
            "error": rng.choice(["extractor_http_400: max_tokens too big", "assistant_http_404", None]) if failed else None,
            "stop_reason": "error" if failed else rng.choice(["max_turns", "user_terminated"]),
            "kg": None if failed else float(rng.randint(0, 20)),
            "dc": None if failed or rng.random() < 0.1 else rng.random(),
            "turns": 0 if failed else rng.randint(1, 15),
        })  # fmt: skip
    return pa.Table.from_pylist(out)


def _frame(rows: pa.Table) -> pd.DataFrame:
    df = rows.to_pandas()
    df["error_kind"] = [None if pd.isna(x) else error_kind(x) for x in df["error"]]
    return df


def test_filters_match_pandas(rows):
    df = _frame(rows)
    q, problems = parse_query({"level": "novice", "condition": "c2", "min.kg": "3", "max.kg": "12.5", "min.dc": "0.2"})
    assert not problems
    got = set(select(rows, q).column("session_id").to_pylist())
    want = df[(df.knowledge_level == "novice") & (df.condition == "c2") & (df.kg >= 3) & (df.kg <= 12.5) & (df.dc >= 0.2)]
    assert got == set(want.session_id) and got  # a missing metric never passes a range


def test_failed_only_and_error_kind(rows):
    df = _frame(rows)
    q, _ = parse_query({"failed": "1", "error": "extractor_http_400"})
    got = set(select(rows, q).column("session_id").to_pylist())
    assert got == set(df[(df.status != "ok") & (df.error_kind == "extractor_http_400")].session_id) and got
    q, _ = parse_query({"failed": "1"})
    assert select(rows, q).num_rows == int((df.status != "ok").sum())


def test_sort_puts_missing_values_last_and_breaks_ties_by_id(rows):
    df = _frame(rows)
    for desc in (False, True):
        q, _ = parse_query({"sort": "dc", **({"desc": "1"} if desc else {})})
        ids = select(rows, q).column("session_id").to_pylist()
        known = df[df.dc.notna()].sort_values(["dc", "session_id"], ascending=[not desc, True])
        assert ids[: len(known)] == list(known.session_id)
        assert set(ids[len(known):]) == set(df[df.dc.isna()].session_id)


def test_pages_cover_every_match_once_and_stay_bounded(rows):
    q, _ = parse_query({"per": "60", "sort": "kg"})
    seen = []
    first = page_of(rows, q)
    for p in range(1, first.pages + 1):
        page = page_of(rows, q.model_copy(update={"page": p}))
        assert len(page.rows) <= 60
        seen += [r["session_id"] for r in page.rows]
    assert seen == select(rows, q).column("session_id").to_pylist()
    assert first.pages == math.ceil(rows.num_rows / 60)
    beyond = page_of(rows, q.model_copy(update={"page": 999}))
    assert beyond.page == first.pages  # a page past the end shows the last one
    big, _ = parse_query({"per": "100000"})
    assert big.per == MAX_PER_PAGE


def test_bad_parameters_are_named_not_guessed(rows):
    q, problems = parse_query({"min.kg": "lots", "sort": "password", "page": "two", "min.secret": "1", "colour": "red", "max.dc": "nan"})
    assert len(problems) == 6
    assert q.ranges == {} and q.sort == "session_id" and q.page == 1
    assert any("colour" in p for p in problems) and any("'lots'" in p for p in problems)


def test_query_round_trips_through_its_own_parameters(rows):
    q, _ = parse_query({"level": "advanced", "min.kg": "2", "failed": "1", "sort": "kg", "desc": "1", "page": "2", "per": "25", "q": "item3"})
    from urllib.parse import parse_qsl

    again, problems = parse_query(dict(parse_qsl(q.params())))
    assert not problems and again == q


def test_neighbours_follow_the_filtered_sorted_list(rows):
    q, _ = parse_query({"condition": "c1", "sort": "kg", "desc": "1"})
    ids = select(rows, q).column("session_id").to_pylist()
    prev_id, next_id, pos, n = neighbours(rows, q, ids[3])
    assert (prev_id, next_id, pos, n) == (ids[2], ids[4], 4, len(ids))
    assert neighbours(rows, q, ids[0])[0] is None and neighbours(rows, q, ids[-1])[1] is None
    outside = next(s for s in rows.column("session_id").to_pylist() if s not in ids)
    assert neighbours(rows, q, outside)[2] is None


def test_facets_and_failure_counts(rows):
    df = _frame(rows)
    fv = facets(rows)
    assert fv["level"] == ["novice", "intermediate", "advanced"]
    assert fv["condition"] == sorted(df.condition.unique())
    counts = failure_counts(rows)
    failed = df[df.status != "ok"].fillna({"error_kind": "failed"})
    want = failed.groupby(["condition", "error_kind"]).size()
    assert {(r["condition"], r["error_kind"]): r["n_failed"] for r in counts} == {k: int(v) for k, v in want.items()}
    assert [r["n_failed"] for r in counts] == sorted((r["n_failed"] for r in counts), reverse=True)
    sessions = df.groupby("condition").size()
    assert all(r["n_sessions"] == sessions[r["condition"]] and r["share"] == r["n_failed"] / r["n_sessions"] for r in counts)
    assert {r["example"] for r in counts if r["error_kind"] == "extractor_http_400"} == {"max_tokens too big"}


def test_error_kind_is_the_named_failure():
    assert error_kind("extractor_http_400: max_tokens=8192 cannot be greater than max_model_len=4096") == "extractor_http_400"
    assert error_kind("assistant_timeout") == "assistant_timeout"
    assert error_kind(None) is None


@pytest.mark.parametrize(
    "manifest, planned, committed, failed, label",
    [
        (None, None, 10, 0, "unknown"),
        ({"status": "ok", "invocations": [{"finished_at": "t", "status": "ok"}]}, 10, 10, 0, "complete"),
        ({"status": "ok_with_failed_sessions", "invocations": [{"finished_at": "t"}]}, 10, 10, 3, "with failures"),
        ({"status": "ok_with_failed_sessions", "invocations": [{"finished_at": "t"}]}, 10, 10, 10, "all sessions failed"),
        ({"status": "interrupted", "invocations": [{"finished_at": "t"}]}, 96, 40, 0, "interrupted"),
        ({"status": "incomplete", "invocations": [{"finished_at": "t"}]}, 96, 90, 0, "incomplete"),
        ({"status": "ok", "invocations": [{"finished_at": "t"}]}, 96, 90, 0, "incomplete"),  # fewer rows than planned is never "complete"
        ({"status": "failed", "invocations": [{"finished_at": "t"}]}, 96, 0, 0, "failed"),
        ({"status": "stopped_on_failures", "invocations": [{"finished_at": "t", "totals": {"stopped": {
            "error": "assistant_http_404", "failed": 32, "finished": 32}}}]}, 96, 32, 32, "stopped on failures"),
        ({"status": "ok", "invocations": [{"finished_at": "t"}, {"finished_at": None, "status": "running"}]}, 10, 10, 0, "running?"),
    ],
)
def test_run_status(manifest, planned, committed, failed, label):
    facts = {**manifest_facts(manifest), "n_planned": planned}
    st = RunStatus(root=Path("."), layout="committed", config_hash=None, n_committed=committed, n_ok=committed - failed,
                   n_failed=failed, **facts)
    got, detail = run_status(manifest, st.completeness(), committed, failed)
    assert got == label and detail
