"""failure_class: the one rule that sorts a session's error into infra (rerun by default) or
model (a result), over the error codes the loop, the HTTP client, the vLLM pool and the parsers
name."""

from __future__ import annotations

import pytest

from ray_knowsim.schema.failures import error_reason, failure_class

INFRA = [
    "user_sim_http_500", "assistant_http_503:server_error", "assistant_http_429", "extractor_timeout",
    "assistant_connection", "user_sim_bad_response", "assistant_rate_limited_long", "judge_limiter_error",
    "assistant_vllm_engine_dead", "user_sim_vllm_replica_died", "extractor_vllm_no_replica",
    "assistant_vllm_request_failed", "assistant_offline_unknown_prompt", "assistant_bad_request",
]
MODEL = [
    "extractor_invalid_json", "extractor_invalid_signals", "user_sim_invalid_output", "extractor_empty",
    "assistant_empty", "user_sim_truncated", "extractor_truncated", "empty_user_message", "assistant_refusal",
    "assistant_vllm_prompt_too_long", "assistant_http_400:context_length_exceeded",
]


@pytest.mark.parametrize("code", INFRA)
def test_transport_engine_and_limiter_failures_are_infra(code):
    assert failure_class(code) == "infra"


@pytest.mark.parametrize("code", MODEL)
def test_unreadable_truncated_and_empty_answers_are_model(code):
    assert failure_class(code) == "model"


def test_details_after_the_code_do_not_change_the_class():
    assert failure_class("user_sim_http_500: upstream down (after 3 attempts)") == "infra"
    assert failure_class("extractor_invalid_json: no JSON object in the reply") == "model"
    assert failure_class("assistant_timeout: no answer within timeout_s=120 (3 attempts)") == "infra"
    assert failure_class("user_sim_connection: connection refused") == "infra"
    assert failure_class("assistant_vllm_engine_dead: engine core died") == "infra"
    assert error_reason("assistant_http_503:server_error") == "http_503:server_error"


def test_no_error_has_no_class_and_an_unknown_one_is_kept_as_a_result():
    assert failure_class(None) is None and failure_class("") is None
    assert failure_class("standin: something odd") == "model"  # never rerun behind the user's back
    assert failure_class("assistant_weird_new_reason") == "model"
