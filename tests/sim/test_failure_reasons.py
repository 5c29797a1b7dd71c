"""A failed session's row keeps the failure's reason (the server's message, masked), and a
session row counts truncated answers per role."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ray_knowsim.demo import demo_items
from ray_knowsim.schema.chat import ChatResponse, Usage
from ray_knowsim.schema.results import ERROR_DETAIL_CHARS, TRUNCATION_ROLES, truncation_column

from tests.doubles.sim_shard import context, offline_models, run, session, shard_of

SERVER_SAYS = "HTTP 400: max_tokens=8192 cannot be greater than max_model_len=4096"


class Rewriting:
    """Wraps a model; ``rewrite(request, response)`` changes what one role's requests get back."""

    name = "rewriting"

    def __init__(self, inner, role, rewrite):
        self.inner, self.role, self.rewrite = inner, role, rewrite

    async def generate(self, request):
        response = await self.inner.generate(request)
        return self.rewrite(request, response) if request.role == self.role else response


@pytest.fixture(scope="module")
def item():
    return [i for i in demo_items() if i.task == "math"][0]


def test_a_failed_session_keeps_the_servers_reason_masked_and_bounded(item):
    said = f"{SERVER_SAYS} (echoed key sk-abcdefghijklmnop1234) " + "x" * 2000
    failing = Rewriting(offline_models().user_sim, "extractor",
                        lambda _req, _resp: ChatResponse(text="", usage=Usage(5, 0), error="http_400", detail=said))
    [result] = run(shard_of([session(item, "novice", "socratic")]), offline_models(failing), context(max_turns=2))
    row = result.session
    assert row.status == "failed" and row.error == "extractor_http_400"
    assert row.error_detail.startswith(SERVER_SAYS + " (echoed key ***) xxx") and "sk-abc" not in row.error_detail
    assert len(row.error_detail) == ERROR_DETAIL_CHARS and row.error_detail.endswith("…")


def test_an_unreadable_answer_keeps_the_parsers_complaint(item):
    garbled = Rewriting(offline_models().user_sim, "extractor", lambda _req, resp: replace(resp, text="not json at all"))
    [result] = run(shard_of([session(item, "novice", "socratic")]), offline_models(garbled), context(max_turns=1, attempts=2))
    row = result.session
    assert row.status == "failed" and row.error == "extractor_invalid_json" and row.error_detail


def test_truncated_answers_are_counted_per_role(item):
    cut = Rewriting(offline_models().user_sim, "assistant", lambda _req, resp: replace(resp, finish_reason="length"))
    [result] = run(shard_of([session(item, "novice", "socratic")]), offline_models(cut), context(max_turns=2))
    row = result.session
    assert row.status == "ok" and row.llm_truncations > 0 and row.error_detail is None
    per_role = {role: getattr(row, truncation_column(role)) for role in TRUNCATION_ROLES}
    assert per_role == {"user_sim": 0, "assistant": row.llm_truncations, "extractor": 0}
