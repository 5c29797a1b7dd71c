"""A deterministic stand-in for every LLM role, so whole runs work with no network and no key.

It reads the facts the renderers hand it out of band (``ChatRequest.offline_facts``; over HTTP our
own server receives them as a request extension) and answers the role they name with valid output for that role's schema (prose for the assistant).
Same seed and same request (messages, temperature, request seed) give the same text: randomness
comes from a hash of those, never from a global generator. It behaves like a crude but honest
model of each role, DESIGNED to exhibit the paper's qualitative patterns on the demo items (so
its pattern tests are wiring checks, not evidence about real tutors). One module per role:

* assistant (:mod:`.assistant`): teaches IUs by writing out their descriptions, as each registered
  tutor strategy's ``offline_reply`` says (comprehensive: many IUs at once; socratic: one or two,
  in part, with a guiding question; adaptive: what is asked, missing prerequisites first; simple:
  one sentence about what was asked).
* learner simulator (:mod:`.learner`): asks about its connectable unknowns (hedging on struggling ones), tries
  reasoning on partly understood ones, now and then restates the tutor; never names unaware IUs.
* signal extractor (:mod:`.extractor`): labels each IU from how much of the IU's wording (IDF-weighted word overlap)
  the tutor's reply carries, and the learner's attempt from markers in the sentences touching it.
* judges and graph extraction (:mod:`.judges`), baseline learners (:mod:`.learner`): simple functions of the transcript or text.
* the simulator review (:mod:`.review`): word-overlap checks of the learner's messages against its
  states and of the extractor's labels against the replies.

The assistant's prompt names only the item (a tutor does not see the IU graph), so the offline
assistant looks the graph up in its registry: the demo graphs by default, plus any registered
with :meth:`OfflineModel.register_graphs` or the ``graph_files`` option. Without a graph it
answers with a generic reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ray_knowsim.llm.offline.assistant import generic_reply, teach
from ray_knowsim.llm.offline.extractor import _extract
from ray_knowsim.llm.offline.graphs import GraphVocabulary, vocabulary
from ray_knowsim.llm.offline.judges import _extract_graph, _rate, _terminate
from ray_knowsim.llm.offline.learner import _baseline_turn, _user_turn
from ray_knowsim.llm.offline.review import _review
from ray_knowsim.llm.offline.words import ntokens, sentences, words
from ray_knowsim.schema.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.schema.graph import IUGraph, parse_graph
from ray_knowsim.schema.items import item_key

#: template name (or name prefix ending in "_") -> the structured answer for that prompt's facts
_RESPONDERS: tuple[tuple[str, Callable[[Mapping[str, Any], random.Random], Mapping[str, Any]]], ...] = (
    ("user_first", _user_turn),
    ("user_turn", _user_turn),
    ("baseline_", _baseline_turn),
    ("extractor", lambda ctx, rng: _extract(ctx)),
    ("rater", lambda ctx, rng: _rate(ctx)),
    ("termination_judge", lambda ctx, rng: _terminate(ctx)),
    ("simulator_review", lambda ctx, rng: _review(ctx)),
    ("graph_", lambda ctx, rng: _extract_graph(ctx)),
)


class OfflineModel:
    """Deterministic ChatModel for all KnowSim roles (see the module docstring)."""

    #: answers from ``ChatRequest.offline_facts``: served over HTTP, its models list says so
    #: (llm/offline/server.py), so that a run sends it the facts without a flag (backends/http/offline_double.py)
    reads_offline_facts = True

    def __init__(
        self,
        name: str = "offline",
        seed: int = 0,
        graphs: Mapping[str, IUGraph | Mapping[str, Any]] | None = None,
        graph_files: Iterable[str] = (),
        include_demo_graphs: bool = True,
    ):
        self.name = name
        self.seed = int(seed)
        self._graphs: dict[str, IUGraph] = {}
        if include_demo_graphs:
            from ray_knowsim.demo import demo_graphs

            for task in ("math", "expertqa"):
                self.register_graphs(demo_graphs(task), task=task)
        for path in graph_files:
            self.register_graphs(json.loads(Path(path).read_text(encoding="utf-8")))
        if graphs:
            self.register_graphs(graphs)

    # -- registry --------------------------------------------------------------------------

    def register_graphs(self, graphs: Mapping[str, IUGraph | Mapping[str, Any]], task: str | None = None) -> None:
        """Add graphs keyed by item id or by ``"<task>/<item_id>"`` (the engine's item key)."""
        for key, graph in graphs.items():
            g = graph if isinstance(graph, IUGraph) else parse_graph(graph, key)
            self._graphs[key] = g
            if task is not None:
                self._graphs[item_key(task, key)] = g

    def graph_for(self, task: str | None, item_id: str | None) -> IUGraph | None:
        if item_id is None:
            return None
        return self._graphs.get(item_key(task, item_id)) or self._graphs.get(item_id)

    # -- protocol --------------------------------------------------------------------------

    async def generate(self, request: ChatRequest) -> ChatResponse:
        answer = self.respond(request)
        await asyncio.sleep(0)  # a model call yields to the loop, as every real one does
        return answer

    def respond(self, request: ChatRequest) -> ChatResponse:
        prompt_tokens = sum(ntokens(m.get("content") or "") for m in request.messages)
        try:
            text = self._answer(request)
        except OfflineError as exc:
            return ChatResponse(text="", usage=Usage(prompt_tokens, 0), error=str(exc), finish_reason="error")
        return ChatResponse(text=text, usage=Usage(prompt_tokens, ntokens(text)), finish_reason="stop")

    def _rng(self, request: ChatRequest) -> random.Random:
        material = json.dumps(
            {"seed": self.seed, "request_seed": request.seed, "temperature": request.temperature, "messages": list(request.messages)},
            sort_keys=True,
            ensure_ascii=False,
        )
        return random.Random(int.from_bytes(hashlib.sha256(material.encode("utf-8")).digest()[:8], "big"))

    def _answer(self, request: ChatRequest) -> str:
        ctx = request.offline_facts
        rng = self._rng(request)
        if ctx is None:
            if request.json_schema is not None:
                raise OfflineError(NO_FACTS)
            return generic_reply(_last(request.messages, "user"))
        template = str(ctx.get("template", ""))
        role = ctx.get("role")
        if role == "assistant":
            return self._assistant(ctx, request.messages, rng)
        for prefix, answer in _RESPONDERS:
            if template == prefix or (prefix.endswith("_") and template.startswith(prefix)):
                return _dump(answer(ctx, rng))
        raise OfflineError(f"offline_unknown_prompt: template {template!r} (role {role!r})")

    # -- assistant -------------------------------------------------------------------------

    def _assistant(self, ctx: Mapping[str, Any], messages: Sequence[Mapping[str, str]], rng: random.Random) -> str:
        chat = [(m["role"], m.get("content") or "") for m in messages if m.get("role") in ("user", "assistant")]
        latest = chat[-1][1] if chat and chat[-1][0] == "user" else ""
        graph = self.graph_for(ctx.get("task"), ctx.get("item_id"))
        if graph is None:
            return generic_reply(latest)
        return teach(vocabulary(graph), ctx.get("offline_reply"), chat, rng)


#: the error for a structured request without facts, naming the fix (the offline test double can
#: only answer the roles from the facts the renderers hand it; it never parses prompt text)
NO_FACTS = ("offline_unknown_prompt: a structured request without offline facts. This is the offline test double: it "
            "answers only from facts sent with each request, which `ray-knowsim run` sends to an endpoint whose models "
            "list marks it as serve-offline; else set --set models.NAME.offline_server=true.")


class OfflineError(RuntimeError):
    """A request the offline model cannot answer; becomes ``ChatResponse.error``."""


def _dump(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _last(messages: Sequence[Mapping[str, str]], role: str) -> str:
    for m in reversed(messages):
        if m.get("role") == role:
            return m.get("content") or ""
    return ""


__all__ = ["GraphVocabulary", "OfflineError", "OfflineModel", "sentences", "vocabulary", "words"]
