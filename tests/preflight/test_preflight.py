"""The checks before spending (preflight/checks.py): a run whose model entries cannot be used
stops before any session starts and before any chat request is sent. The run joins (or starts) Ray
before the checks, so an endpoint's cluster-wide quota covers the checks' requests too
(tests/preflight/test_quota.py): the module shares one local Ray instead of starting one per run."""

from __future__ import annotations

import socket
from collections import Counter

import pytest
from aiohttp import web

from ray_knowsim.config import parse_run_config
from ray_knowsim.preflight.estimate import estimate
from ray_knowsim.plan.sessions import Plan, load_inputs
from ray_knowsim.preflight.checks import PreflightFailed, check_before_spending
from ray_knowsim.run.fan_out import run
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.offline.server import build_app, serve_app_in_thread
from ray_knowsim.schema.roles import first_try_tokens
from tests.doubles.run_config import small_config

pytestmark = pytest.mark.usefixtures("ray_local")


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


# ----------------------------------------------------------------------------- one verdict per role


def test_the_measured_14_iu_case_gets_one_verdict_that_names_the_context_that_works():
    from ray_knowsim.preflight.checks import context_verdict

    # SmolLM2 as the extractor of a 14-IU graph: a 4,138-token prompt, the default cap 8,192, an 8k context
    level, text = context_verdict("extractor", 4138, 8192, 3, 14, 8192, "models.sim.max_model_len: {n}")
    assert level == "error"
    assert "no roles.extractor.max_tokens fits this context with a truncation retry" in text
    assert "the first try for a 14-IU graph alone asks for 4,096 tokens, 4,054 are left" in text
    assert "a context of at least 12,330 tokens (models.sim.max_model_len: 16384)" in text
    assert "at most" not in text  # no cap is advised that the budget check would then call too small
    assert context_verdict("extractor", 4138, 8192, 3, 14, 16384, "models.sim.max_model_len: {n}") is None
    # the cap the old message advised: it fits, but leaves no retry, and the verdict says what does
    level, text = context_verdict("extractor", 4138, 4054, 3, 14, 8192, "start the vLLM server with --max-model-len {n}")
    assert level == "warning" and "cannot be asked again" in text
    assert "no max_tokens keeps the retry within 8,192 tokens: that needs a context of at least 12,330" in text
    assert "--max-model-len 16384" in text and "at least 8,192" not in text
    # a context where a smaller cap keeps the retry: that cap is named, and it keeps the retry
    level, text = context_verdict("extractor", 4138, 8192, 3, 14, 10240, "x {n}")
    assert level == "error" and "set roles.extractor.max_tokens to at most 6,102 (first try 4,096, retry 6,102)" in text


def tokenizer_dir(path) -> str:
    """A model dir holding a real tokenizer.json (one token per whitespace-separated word)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit

    tok = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = WhitespaceSplit()
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return str(path)


def test_a_self_hosted_entry_gets_one_coherent_verdict_counted_with_its_tokenizer(tmp_path):
    from ray_knowsim.schema.roles import extractor_budget

    model = tokenizer_dir(tmp_path / "model")
    data = small_config(models={"sim": {"backend": "offline"},
                                "local": {"backend": "vllm", "model": model, "max_model_len": 100_000}})
    data["roles"]["extractor"] = "local"
    cfg = parse_run_config(data)
    inputs = load_inputs(cfg)
    est = estimate(cfg, Plan(cfg, inputs), inputs)
    assert est.per_role["extractor"].token_counter.startswith(f"the model's tokenizer ({model})")
    big = est.largest_prompts["extractor:local"]
    wanted = extractor_budget(big.graph_size)
    # a context where the first try fits but no cap keeps a retry
    data["models"]["local"]["max_model_len"] = big.first_turn + wanted
    with pytest.raises(PreflightFailed) as refused:
        check_before_spending(parse_run_config(data), Plan(cfg, inputs), inputs)
    message = str(refused.value)
    assert f"its largest first-turn prompt is ~{big.first_turn:,} tokens (the model's tokenizer" in message
    assert "no roles.extractor.max_tokens fits this context" in message and "models.local.max_model_len: " in message
    assert "--max-model-len" not in message and "at least" in message and "at most" not in message
    # the largest cap that fits: it runs, with ONE warning about the lost retry, naming the context that keeps it
    data["roles"]["extractor"] = {"model": "local", "max_tokens": wanted}
    checked = check_before_spending(parse_run_config(data), Plan(cfg, inputs), inputs)
    lines = [f.line() for f in checked.warnings]
    assert not checked.errors and sum("cannot be asked again" in w for w in lines) == 1, lines
    assert not any("set max_tokens to at least" in w for w in lines)  # the budget warning is folded into the verdict


def test_run_prints_preflight_warnings_as_plain_lines(tmp_path, capsys):
    from ray_knowsim.cli.main import main as cli
    import yaml

    data = small_config(models={"sim": {"backend": "offline"}})
    data["roles"]["extractor"] = {"model": "sim", "max_tokens": 300}  # the first try asks for the cap: a budget warning
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli(["validate-config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: roles.extractor.max_tokens 300" in err and "RoleBudgetWarning" not in err and ".py:" not in err, err


def test_the_timeout_check_uses_the_measured_speed_and_covers_the_retry_at_the_cap():
    """A stand-in that decodes at 20 tokens/s (SmolLM2 on 2 cores): the assistant's retry at its
    3,000-token cap takes ~150 s, above a 60 s timeout. The 60 tok/s prior would have passed it
    (3,000 / 60 + 1 = 51 s); the probe measures and the check says so before anything is spent."""
    app, seen = counted(build_app(OfflineModel(), served_name="offline", delay_per_token_s=0.05))
    with serve_app_in_thread(app) as server:
        cfg = parse_run_config(tutor_config(server.base_url, "offline", timeout_s=60))
        inputs = load_inputs(cfg)
        checked = check_before_spending(cfg, Plan(cfg, inputs), inputs)
    cap = checked.capacities["tutor"]
    assert cap.tokens_per_s is not None and 5 < cap.tokens_per_s <= 20.5 and "speed probe" in cap.speed
    assert seen[("POST", "/v1/chat/completions")] == cap.chat_requests >= 1  # the probe: a few short requests, counted
    [slow] = [f.line() for f in checked.warnings if "timeout_s" in f.line()]
    assert slow.startswith("assistant of ") and "(models.tutor) timeout_s 60" in slow
    assert "asked again with max_tokens 3,000 (roles.assistant.max_tokens)" in slow and "measured by the speed probe" in slow
    assert "raise models.tutor.timeout_s to at least" in slow and "fails as assistant_timeout" in slow
    assert "tok/s per request (speed probe)" in checked.summary()


def test_the_checks_chat_requests_are_journaled_apart_in_the_runs_spend(tmp_path):
    """The tiny request and the speed probe are requests the endpoint answers (and may bill): the
    run's spend records them, apart from any session's (io/spend.py: ``checks``)."""
    from ray_knowsim.run.fan_out import journal_checks
    from ray_knowsim.backends.probe import Capacity
    from ray_knowsim.preflight.checks import Preflight
    from ray_knowsim.io.spend import read_journals, run_spend
    from ray_knowsim.schema.price import Price

    checked = Preflight(capacities={"tutor": Capacity(where="x", checked="models list", requests=4, chat_requests=3,
                                                      chat_prompt_tokens=90, chat_completion_tokens=150),
                                    "sim": Capacity(where="y", checked="entry")})
    journal_checks(tmp_path, "h", 0, checked, {"tutor": Price(input=1.0, output=2.0)})
    spend = run_spend(read_journals(tmp_path, "h"), {}, None)
    checks = spend.apart["checks"]
    assert (checks.requests, checks.prompt_tokens, checks.completion_tokens) == (3, 90, 150)
    assert checks.sessions == set() and spend.whole.requests == 3 and spend.in_rows.requests == 0
    assert checks.cost_usd == pytest.approx((90 * 1.0 + 150 * 2.0) / 1e6)
    journal_checks(tmp_path / "none", "h", 0, Preflight(skipped=True), {})  # nothing sent: no journal
    assert not (tmp_path / "none").exists()
