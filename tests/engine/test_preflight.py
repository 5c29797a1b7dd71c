"""The checks before spending (engine/preflight.py): a run whose model entries cannot be used
stops before any session starts and before any chat request is sent. No Ray: the checks run
before it starts."""

from __future__ import annotations

import socket
from collections import Counter

import pytest
from aiohttp import web

from ray_knowsim.engine.config import parse_run_config
from ray_knowsim.engine.estimate import estimate
from ray_knowsim.engine.plan import Plan, load_inputs
from ray_knowsim.engine.preflight import PreflightFailed, check_before_spending
from ray_knowsim.engine.runner import run
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.server import build_app, serve_app_in_thread
from ray_knowsim.schema.roles import first_try_tokens
from tests.engine.conftest import small_config


def counted(app: web.Application) -> tuple[web.Application, Counter]:
    """``app`` with every request counted by (method, path)."""
    seen: Counter = Counter()

    @web.middleware
    async def count(request, handler):
        seen[(request.method, request.path)] += 1
        return await handler(request)

    app.middlewares.append(count)
    return app, seen


def tutor_config(base_url: str, model: str, **entry) -> dict:
    data = small_config(models={"sim": {"backend": "offline"},
                                "tutor": {"backend": "http", "base_url": base_url, "model": model, "offline_server": True, **entry}})
    data["roles"]["assistant"] = {"model": "tutor"}
    return data


def test_a_model_the_endpoint_does_not_serve_stops_the_run_before_any_chat_request(tmp_path):
    app, seen = counted(build_app(OfflineModel(), served_name="offline"))  # what serve-offline serves
    with serve_app_in_thread(app) as server:
        cfg = parse_run_config(tutor_config(server.base_url, "gpt-x"))
        with pytest.raises(PreflightFailed) as refused:
            run(cfg, output=tmp_path / "run", quiet=True)
    message = str(refused.value)
    assert f"models.tutor: {server.base_url} does not serve model 'gpt-x' (it serves: offline)" in message
    assert seen[("POST", "/v1/chat/completions")] == 0 and seen[("GET", "/v1/models")] == 1
    assert not (tmp_path / "run").exists()  # nothing written: the fixed config can use the same directory


def test_an_endpoint_that_does_not_answer_is_named(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = parse_run_config(tutor_config(f"http://127.0.0.1:{port}/v1", "offline", connect_timeout_s=2))
    with pytest.raises(PreflightFailed, match=rf"models\.tutor: http://127\.0\.0\.1:{port}/v1 does not answer \("):
        run(cfg, output=tmp_path / "run", quiet=True)


@pytest.fixture(scope="module")
def small_context():
    """An endpoint whose models list says ``max_model_len`` (vLLM's field); the test sets it."""
    state = {"limit": 0}
    app = web.Application()

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "small", "object": "model", "max_model_len": state["limit"]}]})

    app.router.add_get("/v1/models", models)
    app, seen = counted(app)
    with serve_app_in_thread(app) as server:
        yield server, state, seen


def extractor_config(server, **extractor) -> dict:
    data = small_config(models={"sim": {"backend": "offline"},
                                "small": {"backend": "http", "base_url": server.base_url, "model": "small", "timeout_s": 600}})
    data["roles"]["extractor"] = {"model": "small", **extractor}
    return data


@pytest.mark.parametrize("overshoot", ["first_try", "retry"])
def test_a_prompt_that_does_not_fit_the_context_stops_the_run_naming_role_sizes_and_limit(small_context, tmp_path, overshoot):
    server, state, seen = small_context
    cfg = parse_run_config(extractor_config(server, max_tokens=6000))
    inputs = load_inputs(cfg)
    big = estimate(cfg, Plan(cfg, inputs), inputs).largest_prompts["extractor:small"]  # what the dry run renders
    first = first_try_tokens("extractor", 6000, big.graph_size)
    assert first < 6000
    # the first try does not fit; or it does, but the retry of a truncated answer (the cap) does not
    state["limit"] = big.first_turn + first - 1 if overshoot == "first_try" else big.first_turn + first + 1
    with pytest.raises(PreflightFailed) as refused:
        run(cfg, output=tmp_path / "run", quiet=True)
    message = str(refused.value)
    assert "roles.extractor (models.small)" in message and f"~{big.first_turn:,} tokens" in message
    assert f"{state['limit']:,}-token context of {server.base_url} (max_model_len in its models list)" in message
    if overshoot == "first_try":
        assert f"first try's max_tokens {first:,}" in message
    else:
        assert "asked again with max_tokens 6,000" in message and f"at most {state['limit'] - big.first_turn:,}" in message
    assert seen[("POST", "/v1/chat/completions")] == 0


def test_a_fitting_run_passes_with_its_warnings_recorded(small_context):
    server, state, _ = small_context
    state["limit"] = 1_000_000
    cfg = parse_run_config(extractor_config(server, max_tokens=6000))
    cfg.models["small"] = cfg.models["small"].model_copy(update={"timeout_s": 2.0})
    inputs = load_inputs(cfg)
    checked = check_before_spending(cfg, Plan(cfg, inputs), inputs)
    assert checked.capacities["small"].max_model_len == 1_000_000 and not checked.errors
    [tight] = [w.line() for w in checked.warnings if "timeout_s" in w.line()]
    assert tight.startswith("roles.extractor (models.small) timeout_s 2") and "raise models.small.timeout_s" in tight
    assert check_before_spending(cfg, Plan(cfg, inputs), inputs, skip=True).to_manifest()["skipped"] is True


def test_a_self_hosted_context_is_checked_without_starting_an_engine(tmp_path):
    data = small_config(models={"sim": {"backend": "offline"},
                                "local": {"backend": "vllm", "model": str(tmp_path / "no-model"), "max_model_len": 256}})
    data["roles"]["extractor"] = "local"
    with pytest.raises(PreflightFailed, match=r"roles\.extractor \(models\.local\).*256-token context of self-hosted vLLM .* "
                                              r"\(the entry's max_model_len\)"):
        run(parse_run_config(data), output=tmp_path / "run", quiet=True)
