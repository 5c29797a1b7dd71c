"""`ray-knowsim run` finds `serve-offline` from its models list and sends it the offline facts,
with no flag in the config; any other server (a real model, our server in front of another
model, an endpoint that does not answer) is never sent them. The stand-in's error for a
structured request without facts names the fix."""

from __future__ import annotations

from ray_knowsim.config import parse_run_config
from ray_knowsim.backends.http.offline_double import adopt_offline_doubles, is_offline_double
from ray_knowsim.backends.http import offline_double
from ray_knowsim.llm.offline import OfflineModel
from ray_knowsim.llm.offline.server import serve_model_in_thread
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.llm.http.response import MESSAGE_CHARS, clipped
from tests.doubles.ports import pick_ports
from tests.doubles.run_config import small_config


class EchoModel:
    """A ChatModel that is not the offline double (it reads no facts)."""

    name = "echo"

    async def generate(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(text=request.messages[-1]["content"], usage=Usage(1, 1), finish_reason="stop")


def _config(**entries):
    models = {k: {"backend": "http", "base_url": url, "model": name, **extra} for k, (url, name, extra) in entries.items()}
    roles = {"user_sim": "sim", "extractor": "sim", "judge": "sim", "assistant": {"model": "tutor"}}
    return parse_run_config(small_config(models=models, roles=roles), check_files=False)


def test_the_offline_double_is_found_and_said_and_nothing_else_is_flipped():
    with serve_model_in_thread(OfflineModel(), served_name="sim-model") as double, \
            serve_model_in_thread(EchoModel(), served_name="my-tutor") as other:
        assert is_offline_double(double.base_url, "sim-model")
        assert not is_offline_double(double.base_url, "another-model")  # the mark is per served model
        assert not is_offline_double(other.base_url, "my-tutor")  # our server in front of another model
        cfg = _config(sim=(double.base_url, "sim-model", {}), tutor=(other.base_url, "my-tutor", {}))
        adopted, lines = adopt_offline_doubles(cfg)
    assert adopted.models["sim"].offline_server is True and adopted.models["tutor"].offline_server is False
    assert lines == [f"models.sim: {double.base_url} is `ray-knowsim serve-offline` (the offline test double; its models "
                     "list says so): its requests carry the facts it answers from (offline_server: true)"]
    assert cfg.models["sim"].offline_server is False  # the config read is not changed under its reader
    assert adopted.public_dict()["models"]["sim"]["offline_server"] is True  # the manifest records it
    assert adopted.config_hash() != cfg.config_hash()  # and a resume compares like with like
    assert adopted.base_dir == cfg.base_dir


def test_an_endpoint_that_does_not_answer_is_not_the_double(monkeypatch):
    import ray_knowsim.backends.http.offline_double as od

    monkeypatch.setattr(od, "STARTING_UP_S", 0.5)  # asked again while refused, then given up
    (port,) = pick_ports(1)
    url = f"http://127.0.0.1:{port}/v1"
    cfg = _config(sim=(url, "m", {}), tutor=(url, "t", {}))
    assert adopt_offline_doubles(cfg) == (cfg, [])


def test_an_entry_that_already_says_offline_server_is_not_asked(monkeypatch):
    monkeypatch.setattr(offline_double, "STARTING_UP_S", 0.3)  # the tutor's refused port is asked again that long
    (port,) = pick_ports(1)
    cfg = _config(sim=(f"http://127.0.0.1:{port}/v1", "m", {"offline_server": True}), tutor=(f"http://127.0.0.1:{port}/v1", "t", {}))
    adopted, lines = adopt_offline_doubles(cfg)
    assert adopted is cfg and lines == []


def test_the_stand_ins_error_without_facts_names_the_fix():
    error = OfflineModel().respond(ChatRequest(messages=({"role": "user", "content": "hi"},), json_schema={"type": "object"})).error
    assert error.startswith("offline_unknown_prompt: a structured request without offline facts")
    assert error.endswith("--set models.NAME.offline_server=true.")
    assert len(error) <= MESSAGE_CHARS  # the row's detail carries the server's message whole


def test_a_server_message_longer_than_the_row_keeps_is_cut_at_a_word_and_says_so():
    text = "word " * 100
    cut = clipped(text.strip(), MESSAGE_CHARS)
    assert len(cut) <= MESSAGE_CHARS and cut.endswith("word...")
    assert clipped("short hint.", MESSAGE_CHARS) == "short hint."


def test_a_server_that_starts_listening_while_asked_is_found():
    """The README's stand-in block starts `serve-offline &` on the line before the run: the run may
    ask before the server listens. A refused connection is asked again for a few seconds."""
    import threading
    import time

    (port,) = pick_ports(1)
    found: list[bool] = []
    url = f"http://127.0.0.1:{port}/v1"
    asker = threading.Thread(target=lambda: found.append(is_offline_double(url, "sim-model")))
    asker.start()
    time.sleep(1.5)  # refused meanwhile
    with serve_model_in_thread(OfflineModel(), served_name="sim-model", port=port):
        asker.join(timeout=15)
    assert found == [True]
