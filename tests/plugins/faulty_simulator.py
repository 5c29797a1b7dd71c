"""A faulty learner or extractor in front of the offline model: TEST DOUBLE for the simulator audit.

``models.<key>: {backend: faulty, plant: [...], share: 1.0, log: DIR}`` answers every role as the
offline model does, then plants each listed kind of simulator error in a ``share`` of the
requests where it can (chosen by a hash of the request id and the kind, so reruns plant the same ones):

* ``learner_claims_unaware`` — the learner's message gains a sentence claiming, or working with,
  an IU its state holds unaware (by the IU's concept name, or by its description's wording
  without the name; several phrasings);
* ``extractor_labels_untouched`` — one IU that the tutor's reply holds no word of is labelled
  ``well_explained``;
* ``extractor_labels_unmentioned`` — one IU the offline extractor labelled ``not_mentioned``
  (whatever the reply holds of it) is labelled ``well_explained``;
* ``extractor_ignores_covered`` — one IU the offline extractor labelled ``well_explained`` is
  labelled ``not_mentioned``.

Each planted error is logged as one JSON line (kind, request id, session id, turn, IU) to a file in
``log`` (one per process), so a test knows which sessions carry one. The audit never reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ray_knowsim.backends.registry import BuildContext, register_backend
from ray_knowsim.schema.chat import ChatRequest, ChatResponse
from ray_knowsim.schema.price import Price

Plant = Literal["learner_claims_unaware", "extractor_labels_untouched", "extractor_labels_unmentioned", "extractor_ignores_covered"]


class FaultyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    backend: Literal["faulty"]
    plant: list[Plant]
    share: float = 1.0
    log: str = ""
    price: Price | None = None  # what its tokens cost (re-extraction's spend is checked against it)


_CLAIMS = (
    "I already understand {concept}, so that part is clear to me.",
    "{Concept} makes sense to me and I can apply it here.",
    "I know {concept} well: {description}",
    "Then {description_lc}",
)


def _chosen(request_id: str, share: float, salt: str = "") -> int | None:
    """A number from the request id when it falls in ``share`` of requests, else None."""
    h = int(hashlib.sha256(f"{salt}{request_id}".encode()).hexdigest(), 16)
    return h // 1000 if (h % 1000) < share * 1000 else None


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class FaultyModel:
    def __init__(self, name: str, entry: FaultyEntry, graphs) -> None:
        from ray_knowsim.llm.offline import OfflineModel

        self.name = name
        self.entry = entry
        self.inner = OfflineModel(name=name)
        self.inner.register_graphs(dict(graphs))

    def _log(self, request: ChatRequest, iu: str, text: str, plant: str = "") -> None:
        if not self.entry.log:
            return
        sid, _, rest = request.request_id.partition("#")
        folder = Path(self.entry.log)
        folder.mkdir(parents=True, exist_ok=True)
        line = {"plant": plant, "request_id": request.request_id, "session_id": sid, "turn": int(rest.split(":")[0] or 0), "iu": iu, "text": text}
        with open(folder / f"planted-{os.getpid()}.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    async def generate(self, request: ChatRequest) -> ChatResponse:
        answer = await self.inner.generate(request)
        facts = request.offline_facts or {}
        if answer.error is not None or not facts:
            return answer
        template = str(facts.get("template", ""))
        taken: set[str] = set()  # IUs a plant already changed in this answer (another plant leaves them)
        for plant in self.entry.plant:
            pick = _chosen(request.request_id, self.entry.share, plant)
            if pick is None:
                continue
            if plant == "learner_claims_unaware" and template in ("user_first", "user_turn"):
                answer = self._claim(request, answer, facts, pick)
            elif plant.startswith("extractor_") and template == "extractor":
                answer = self._label(request, answer, facts, pick, plant, taken)
        return answer

    def _claim(self, request: ChatRequest, answer: ChatResponse, facts, pick: int) -> ChatResponse:
        unaware = [r for r in facts.get("ius", []) if r.get("state") == "unaware"]
        graph = self.inner.graph_for(facts.get("task"), facts.get("item_id"))
        if not unaware or graph is None:
            return answer
        row = unaware[pick % len(unaware)]
        node = next(n for n in graph.nodes if n.id == row["id"])
        first = node.description.split(". ")[0].rstrip(".") + "."
        concept = node.concept[:1].lower() + node.concept[1:]
        sentence = _CLAIMS[(pick // 7) % len(_CLAIMS)].format(
            concept=concept, Concept=node.concept, description=first, description_lc=first[:1].lower() + first[1:])
        data = json.loads(answer.text)
        data["message"] = f"{data['message'].rstrip()} {sentence}"
        self._log(request, node.id, sentence, "learner_claims_unaware")
        return replace(answer, text=json.dumps(data))

    def _label(self, request: ChatRequest, answer: ChatResponse, facts, pick: int, plant: str, taken: set[str]) -> ChatResponse:
        data = json.loads(answer.text)
        entries = [e for e in data.get("iu_analysis") or [] if e["id"] not in taken]
        graph = self.inner.graph_for(facts.get("task"), facts.get("item_id"))
        reply = _words(str(facts.get("assistant_message", "")))
        concepts = {n.id: _words(n.concept) for n in graph.nodes} if graph is not None else {}
        if plant == "extractor_labels_untouched":
            candidates = [e for e in entries if e["teaching_quality"] != "well_explained" and not (concepts.get(e["id"], set()) & reply)
                          and _cover(graph, e["id"], reply) < 0.08]
            new = "well_explained"
        elif plant == "extractor_labels_unmentioned":
            candidates = [e for e in entries if e["teaching_quality"] == "not_mentioned"]
            new = "well_explained"
        else:
            candidates = [e for e in entries if e["teaching_quality"] == "well_explained"]
            new = "not_mentioned"
        if not candidates:
            return answer
        chosen = candidates[pick % len(candidates)]
        chosen["teaching_quality"] = new
        taken.add(chosen["id"])
        chosen["teaching_quality_reasoning"] = f"The tutor explains this concept clearly. -> {new}" if new == "well_explained" else "Not discussed."
        self._log(request, chosen["id"], new, plant)
        return replace(answer, text=json.dumps(data))


_STOP = {"the", "a", "an", "of", "and", "or", "to", "in", "is", "it", "as", "for", "on", "by", "be", "that", "this", "with", "are"}


def _cover(graph, iu: str, reply: set[str]) -> float:
    node = next(n for n in graph.nodes if n.id == iu)
    bag = _words(f"{node.concept} {node.description}") - _STOP
    return len(bag & reply) / len(bag) if bag else 0.0


@register_backend("faulty", FaultyEntry, operational={"log"}, cacheable=False, double=True)
def build_faulty(entry: FaultyEntry, ctx: BuildContext) -> FaultyModel:
    return FaultyModel(ctx.key, entry, ctx.graphs)
