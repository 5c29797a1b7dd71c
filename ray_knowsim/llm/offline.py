"""A deterministic stand-in for every LLM role, so whole runs work with no network and no key.

It reads the facts the renderers hand it out of band (``ChatRequest.offline_facts``; over HTTP our
own server receives them as a request extension) and answers the role they name with valid output for that role's schema (prose for the assistant).
Same seed and same request (messages, temperature, request seed) give the same text: randomness
comes from a hash of those, never from a global generator. It behaves like a crude but honest
model of each role, enough to reproduce the paper's qualitative patterns on the demo items:

* assistant: teaches IUs by writing out their descriptions; *comprehensive* many IUs at once,
  advanced ones included; *socratic* one or two IUs next to what the learner has shown, in part,
  with a guiding question; *adaptive* the IUs the learner asks about, or their missing
  prerequisites first; *minimal* one sentence about what was asked.
* learner simulator: asks about its connectable unknowns (hedging on struggling ones), tries
  reasoning on partly understood ones, now and then restates the tutor; never names unaware IUs.
* signal extractor: labels each IU from how much of the IU's wording (IDF-weighted word overlap)
  the tutor's reply carries, and the learner's attempt from markers in the sentences touching it.
* judges, baseline simulators and graph extraction: simple functions of the transcript or text.

The assistant's prompt names only the item (a tutor does not see the IU graph), so the offline
assistant looks the graph up in its registry: the demo graphs by default, plus any registered
with :meth:`OfflineModel.register_graphs` or the ``graph_files`` option. Without a graph it
answers with a generic reply.
"""

from __future__ import annotations

from ray_knowsim.text import fold_plural

import asyncio
import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ray_knowsim.model.chat import ChatRequest, ChatResponse, Usage
from ray_knowsim.model.graph import IUGraph, build_index, parse_graph

# --- words ------------------------------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """
    a about above after again all also an and any are as at be because been before being below
    between both but by can could did do does doing down during each either else for from further
    had has have having here how however i if in into is it its itself just let like may me might
    more most much must my no nor not now of off on once one only or other our out over own same
    she should so some such than that the their them then there these they this those through to
    too under until up upon us very was we were what when where which while who whom why will with
    would you your yours itself whole thus therefore get gets got use used uses using make makes
    need needs needed way ways thing things know see say said new first second each every many
    another less part given gives give here's it's that's i'm don't can't isn't
    """.split()
)


_stem = fold_plural


def words(text: str) -> list[str]:
    """Content words: lower-cased, stop words and single letters dropped, plurals folded."""
    return list(_words(text))


@lru_cache(maxsize=4096)
def _words(text: str) -> tuple[str, ...]:
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _STOP or (len(w) == 1 and not w.isdigit()):
            continue
        out.append(_stem(w))
    return tuple(out)


def ntokens(text: str) -> int:
    """Usage estimate: whitespace-separated tokens."""
    return len(text.split())


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


# --- the IU vocabulary of one graph -----------------------------------------------------------


@dataclass(frozen=True)
class IUText:
    id: str
    concept: str
    description: str
    weights: Mapping[str, float]  # content word -> IDF weight within the graph
    concept_words: frozenset[str]


class GraphVocabulary:
    """IDF-weighted word sets of a graph's IUs: how much of an IU a text carries."""

    def __init__(self, graph: IUGraph):
        self.graph = graph
        self.index = build_index(graph)
        bags = {n.id: set(words(f"{n.concept} {n.description}")) for n in graph.nodes}
        df = Counter(w for bag in bags.values() for w in bag)
        n = len(bags)
        self.ius: dict[str, IUText] = {}
        for node in graph.nodes:
            weights = {w: math.log(1.0 + n / df[w]) for w in sorted(bags[node.id])}
            self.ius[node.id] = IUText(node.id, node.concept, node.description, weights, frozenset(words(node.concept)))
        self.topo = _topological(self.index)

    def coverage(self, iu_id: str, text_words: set[str]) -> float:
        """Share of the IU's (IDF-weighted) words present in a text."""
        weights = self.ius[iu_id].weights
        total = sum(weights.values())
        if total == 0:
            return 0.0
        return sum(w for word, w in weights.items() if word in text_words) / total

    def concept_hit(self, iu_id: str, text_words: set[str]) -> float:
        """Share of the IU's concept-name words present in a text (how clearly it is named)."""
        cw = self.ius[iu_id].concept_words
        return len(cw & text_words) / len(cw) if cw else 0.0


def _topological(index) -> list[str]:
    indeg = {v: 0 for v in index.ids}
    for v in index.ids:
        indeg[v] = sum(1 for p in index.prereqs[v] if p in indeg)
    queue = [v for v in index.ids if indeg[v] == 0]
    order: list[str] = []
    while queue:
        v = queue.pop(0)
        order.append(v)
        for c in index.children[v]:
            indeg[c] -= 1
            if indeg[c] == 0:
                queue.append(c)
    order.extend(v for v in index.ids if v not in order)  # cycles: node order
    return order


@lru_cache(maxsize=512)
def _vocabulary(graph_json: str) -> GraphVocabulary:
    return GraphVocabulary(IUGraph.model_validate(json.loads(graph_json)))


def vocabulary(graph: IUGraph | Mapping[str, Any]) -> GraphVocabulary:
    data = graph.to_json_dict() if isinstance(graph, IUGraph) else dict(graph)
    return _vocabulary(json.dumps(data, sort_keys=True))


# --- thresholds shared by the roles -----------------------------------------------------------

#: extractor labels from the IDF-weighted share of an IU's words found in the reply
WELL_EXPLAINED_AT = 0.55
SHALLOW_AT = 0.25
#: a learner sentence "touches" an IU when it names most of the concept or carries much of its wording
TOUCH_CONCEPT_AT = 0.6
TOUCH_COVERAGE_AT = 0.35

_ATTEMPT = re.compile(r"\b(let me try|i think|i'd|i would|so that|so we|so i|that gives|which gives|my answer|i get|i got)\b|=", re.I)
_RESTATE = re.compile(r"\b(you said|you're saying|you are saying|so you mean|if i understand|in other words)\b", re.I)
_HEDGE = re.compile(r"\b(not sure|i'm lost|i am lost|confused|don't see|don't get|maybe|i guess|no idea)\b", re.I)


def _label(coverage: float) -> str:
    if coverage >= WELL_EXPLAINED_AT:
        return "well_explained"
    if coverage >= SHALLOW_AT:
        return "shallow"
    return "not_mentioned"


def _lc(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


# --- the model --------------------------------------------------------------------------------


class OfflineModel:
    """Deterministic ChatModel for all KnowSim roles (see the module docstring)."""

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
                self._graphs[f"{task}/{key}"] = g

    def graph_for(self, task: str | None, item_id: str | None) -> IUGraph | None:
        if item_id is None:
            return None
        return self._graphs.get(f"{task}/{item_id}") or self._graphs.get(item_id)

    # -- protocol --------------------------------------------------------------------------

    async def complete(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = [self.respond(r) for r in requests]
        await asyncio.sleep(0)
        return out

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
                raise OfflineError("offline_unknown_prompt: a structured request without offline facts")
            return _generic_reply(_last(request.messages, "user"))
        template = str(ctx.get("template", ""))
        role = ctx.get("role")
        if role == "assistant":
            return self._assistant(ctx, request.messages, rng)
        if template == "user_first" or template == "user_turn":
            return _dump(_user_turn(ctx, rng))
        if template.startswith("baseline_"):
            return _dump(_baseline_turn(ctx, rng))
        if template == "extractor":
            return _dump(_extract(ctx))
        if template == "rater":
            return _dump(_rate(ctx))
        if template == "termination_judge":
            return _dump(_terminate(ctx))
        if template.startswith("graph_"):
            return _dump(_extract_graph(ctx))
        raise OfflineError(f"offline_unknown_prompt: template {template!r} (role {role!r})")

    # -- assistant -------------------------------------------------------------------------

    def _assistant(self, ctx: Mapping[str, Any], messages: Sequence[Mapping[str, str]], rng: random.Random) -> str:
        chat = [(m["role"], m.get("content") or "") for m in messages if m.get("role") in ("user", "assistant")]
        latest = chat[-1][1] if chat and chat[-1][0] == "user" else ""
        graph = self.graph_for(ctx.get("task"), ctx.get("item_id"))
        if graph is None:
            return _generic_reply(latest)
        return _teach(vocabulary(graph), str(ctx.get("strategy", "minimal")), chat, rng)


class OfflineError(RuntimeError):
    """A request the offline model cannot answer; becomes ``ChatResponse.error``."""


def _dump(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _last(messages: Sequence[Mapping[str, str]], role: str) -> str:
    for m in reversed(messages):
        if m.get("role") == role:
            return m.get("content") or ""
    return ""


def _generic_reply(latest: str) -> str:
    topic = " ".join(latest.split()[:12])
    return f"Let's work through this together. You asked: \"{topic}\". Which step would you like to start with?"


# --- assistant strategies ---------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    parts = sentences(text)
    return parts[0] if parts else text


def _partial(description: str) -> str:
    """Roughly the first half of a description (at least its first sentence)."""
    parts = sentences(description)
    if len(parts) > 1:
        return parts[0]
    toks = description.split()
    return " ".join(toks[: max(6, len(toks) // 2)]).rstrip(",;:") + "..."


def _teach(vocab: GraphVocabulary, strategy: str, chat: list[tuple[str, str]], rng: random.Random) -> str:
    latest = chat[-1][1] if chat and chat[-1][0] == "user" else ""
    prior_assistant = set(words(" ".join(t for r, t in chat[:-1] if r == "assistant")))
    user_words = set(words(" ".join(t for r, t in chat if r == "user")))
    # what the learner asks about: IUs named in sentences that show confusion or an attempt (not
    # in "I'm comfortable with ..." sentences, nor in a restated problem statement)
    latest_words = set(w for s in sentences(latest) if _HEDGE.search(s) or _ATTEMPT.search(s) for w in words(s))
    covered = {v: vocab.coverage(v, prior_assistant) >= WELL_EXPLAINED_AT for v in vocab.index.ids}
    familiar = {v: vocab.concept_hit(v, user_words) >= TOUCH_CONCEPT_AT for v in vocab.index.ids}
    asked = sorted(
        (v for v in vocab.index.ids if vocab.concept_hit(v, latest_words) >= TOUCH_CONCEPT_AT),
        key=lambda v: (-vocab.concept_hit(v, latest_words), vocab.topo.index(v)),
    )
    hedged = bool(_HEDGE.search(latest))
    attempted = bool(_ATTEMPT.search(latest))

    def ready(v: str) -> bool:
        return all(covered.get(p, True) or familiar.get(p, True) for p in vocab.index.prereqs[v])

    def missing_first(v: str, seen: set[str] | None = None) -> str:
        """v itself when its prerequisites are in place, else its nearest missing prerequisite."""
        seen = seen or set()
        for p in vocab.index.prereqs[v]:
            if p in vocab.ius and p not in seen and not (covered[p] or familiar[p]):
                seen.add(p)
                return missing_first(p, seen)
        return v

    opener = ""
    if attempted:
        opener = "Let me correct that step. " if hedged else "Good, that step works. "
    elif hedged:
        opener = "No problem, let's untangle it. "

    if strategy == "comprehensive":
        pending = [v for v in vocab.topo if not covered[v]]
        quota = max(4, math.ceil(0.6 * vocab.index.size))
        chosen = list(dict.fromkeys(asked[:2] + pending))[:quota]
        if len(chosen) < 4:  # nearly everything taught: recap the whole solution path again
            chosen = list(dict.fromkeys(chosen + vocab.topo[-(4 - len(chosen)) :]))
        parts = [opener + "Here is the complete picture, step by step, including the more advanced points."]
        for v in chosen:
            iu = vocab.ius[v]
            parts.append(f"**{iu.concept}.** {iu.description}")
        parts.append("Read through each part carefully; together they give the full solution.")
        return "\n\n".join(parts)

    if strategy == "adaptive":
        targets: list[str] = []
        for v in asked:
            t = missing_first(v)
            if t not in targets:
                targets.append(t)
        if not targets:
            nxt = [v for v in vocab.topo if not covered[v] and ready(v)]
            targets = nxt[:1] or [vocab.topo[-1]]
        targets = targets[:2]
        parts = [opener.strip() or "Let's build on what you already have."]
        for v in targets:
            iu = vocab.ius[v]
            parts.append(f"{iu.concept}: {iu.description}")
        parts.append("Try the next step with that, and tell me where it stops making sense.")
        return "\n\n".join(parts)

    if strategy == "socratic":
        ready_asked = [v for v in asked if ready(v) and not covered[v]]
        frontier = [v for v in vocab.topo if not covered[v] and ready(v)]
        if ready_asked:
            v = ready_asked[0]
        elif asked:
            v = missing_first(asked[0])
        else:
            v = frontier[0] if frontier else vocab.topo[-1]
        iu = vocab.ius[v]
        hint = _partial(iu.description)
        question = rng.choice(
            (
                f"How could you use that idea of {_lc(iu.concept)} in this problem?",
                f"What do you think {_lc(iu.concept)} tells us about the next step?",
                f"Can you try applying {_lc(iu.concept)} yourself before I say more?",
            )
        )
        text = f"{opener}Think about {_lc(iu.concept)}. {hint} {question}"
        nearby = [u for u in ready_asked + frontier if u != v]
        if nearby and rng.random() < 0.3:  # now and then a second, neighbouring idea
            other = vocab.ius[nearby[0]]
            text += f" And once that is clear: {_partial(other.description)} Why might that matter here?"
        return text.strip()

    # minimal: a short, direct answer about what was asked (or the last step)
    v = asked[0] if asked else next((x for x in reversed(vocab.topo) if not covered[x]), vocab.topo[-1])
    iu = vocab.ius[v]
    return f"{opener}{_first_sentence(iu.description)}".strip()


# --- learner simulator ------------------------------------------------------------------------


def _user_turn(ctx: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    ius = {row["id"]: row for row in ctx.get("ius", [])}
    concept = {i: row.get("concept") or i for i, row in ius.items()}
    state = {i: row.get("state", "unaware") for i, row in ius.items()}
    connectable = [i for i in ctx.get("connectable", []) if i in ius]
    unaware = [i for i in ctx.get("unaware", []) if i in ius]
    known = [i for i in ius if state[i] == "knows_well"]
    turn = int(ctx.get("turn", 1))
    transcript = ctx.get("transcript") or []
    last_reply = next((t for r, t in reversed(transcript) if r == "assistant"), "")
    allow_terminate = bool(ctx.get("allow_terminate"))

    if ctx.get("stop_hint"):
        return {
            "thought": "This is too much for me; I want to stop.",
            "message": "Honestly, this is too much for me at once. I'm lost and I'd like to stop here.",
            "attempt_verify": False,
            "terminate": True,
        }
    if turn == 1:
        lines = [f"I'm working on this problem: {ctx.get('problem', '')}"]
        if known:
            lines.append(f"I'm comfortable with {_lc(concept[known[0]])}.")
        if connectable:
            lines.append(f"But I'm confused about {_lc(concept[connectable[0]])} and don't see how to go on. Can you help?")
        else:
            lines.append("But I don't know how to start. Can you help?")
        return {
            "thought": f"I know {len(known)} of the ideas; I'm stuck early on.",
            "message": " ".join(lines),
            "attempt_verify": False,
            "terminate": False,
        }
    if not connectable and not unaware:
        return {
            "thought": "Everything fits together now.",
            "message": "I think I've got it now: I can put all the steps together and reach the answer myself. Is that right?",
            "attempt_verify": True,
            "terminate": allow_terminate,
        }
    lines: list[str] = []
    unaware_names = [set(words(concept[i])) for i in unaware]

    def names_unaware(text: str) -> bool:
        tw = set(words(text))
        return any(cw and len(cw & tw) >= TOUCH_CONCEPT_AT * len(cw) for cw in unaware_names)

    gist = next(
        (s for s in sentences(last_reply) if len(s.split()) >= 8 and not s.startswith("**") and not names_unaware(s)), ""
    )
    if gist and rng.random() < 0.35:
        lines.append(f"So you're saying {_lc(gist.rstrip('.'))}.")
    if connectable:
        start = (turn - 2) % len(connectable)
        focus = [connectable[start]]
        if len(connectable) > 1 and rng.random() < 0.5:
            focus.append(connectable[(start + 1) % len(connectable)])
        for i in focus:
            name = _lc(concept[i])
            if state[i] == "struggling":
                lines.append(
                    rng.choice(
                        (
                            f"I'm still lost on {name}; I'm not sure what it means here.",
                            f"I don't get {name} yet. Could you explain it differently?",
                            f"Maybe {name} is the step I keep missing? I'm confused about it.",
                        )
                    )
                )
            else:
                lines.append(
                    rng.choice(
                        (
                            f"Let me try {name} on the problem: I think it gives the next step, so I would apply it to our problem.",
                            f"I think {name} works like this here, so that gives me the next part. Is that right?",
                        )
                    )
                )
    else:
        lines.append("I followed that, but I don't see what comes next. I'm a bit lost.")
    return {
        "thought": f"Ready to work on {len(connectable)} idea(s); {len(unaware)} still unknown to me.",
        "message": " ".join(lines),
        "attempt_verify": False,
        "terminate": False,
    }


def _baseline_turn(ctx: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    turn = int(ctx.get("turn", 1))
    transcript = ctx.get("transcript") or []
    last_reply = next((t for r, t in reversed(transcript) if r == "assistant"), "")
    # a baseline learner stops after a few turns, at a point fixed by the conversation's opening
    opening = json.dumps([ctx.get("item_id"), ctx.get("method")])
    end_at = 3 + int(hashlib.sha256(opening.encode()).hexdigest(), 16) % 4
    out: dict[str, Any]
    if turn == 1:
        profile = ctx.get("initial_state") or {}
        knows = [k.split(": ", 1)[-1] for k, v in profile.items() if v == "knows_well"][:1]
        extra = f" I already know {_lc(knows[0])}." if knows else ""
        out = {"message": f"Can you help me with this problem? {ctx.get('problem', '')}{extra}", "terminate": False}
    elif turn >= end_at and ctx.get("allow_terminate"):
        out = {"message": "Thanks, I think I've got it now and can finish on my own.", "terminate": True}
    else:
        content = next((s for s in sentences(last_reply) if len(s.split()) >= 8), _first_sentence(last_reply))
        gist = " ".join(content.lstrip("*").split()[:14]).rstrip(".,;:*")
        follow = rng.choice(("What should I do next?", "Can you show me the next step?", "Why does that work?"))
        out = {"message": f"Okay, so {_lc(gist)}. {follow}" if gist else follow, "terminate": False}
    if ctx.get("method") != "zero-shot":
        out = {"thought": f"Turn {turn}: respond to the tutor and decide whether I'm done.", **out}
    return out


# --- signal extractor -------------------------------------------------------------------------


def _extract(ctx: Mapping[str, Any]) -> dict[str, Any]:
    vocab = vocabulary(ctx["graph"])
    reply_words = set(words(ctx.get("assistant_message", "")))
    prior_assistant = set(words(" ".join(t for r, t in ctx.get("transcript", []) if r == "assistant")))
    user_sentences = sentences(ctx.get("user_message", ""))
    analysis = []
    for v in vocab.index.ids:
        iu = vocab.ius[v]
        cov = vocab.coverage(v, reply_words)
        label = _label(cov)
        attempt, hedge, why = "none", False, "The learner's message does not involve this concept."
        for s in user_sentences:
            sw = set(words(s))
            if vocab.concept_hit(v, sw) < TOUCH_CONCEPT_AT and vocab.coverage(v, sw) < TOUCH_COVERAGE_AT:
                continue
            if _RESTATE.search(s):
                attempt, why = "articulation", "The learner restates what the tutor said about it."
                break
            if _ATTEMPT.search(s):
                own = {w for w in sw if w in iu.weights} - prior_assistant
                if own or not prior_assistant:
                    attempt, why = "reasoning", "The learner tries to apply it to the problem themselves."
                else:
                    attempt, why = "articulation", "The learner repeats the tutor's wording about it."
                hedge = bool(_HEDGE.search(s))
                break
            why = "The learner asks about it but makes no attempt."
        if attempt == "none":
            role = "not_applicable"
        elif label == "not_mentioned":
            role = "ignored"
        elif hedge:
            role = "confirmed_incorrect_with_explanation"
        else:
            role = "confirmed_correct"
        analysis.append(
            {
                "id": v,
                "concept": iu.concept,
                "teaching_quality_reasoning": f"The reply carries {round(100 * cov)}% of this concept's key wording.",
                "teaching_quality": label,
                "user_attempt_reasoning": why,
                "user_attempt_type": attempt,
                "assistant_response_role": role,
            }
        )
    return {"iu_analysis": analysis}


# --- judges -----------------------------------------------------------------------------------

_DONE_MATH = re.compile(r"\b(got it|the answer is|i can solve|reach the answer|finish on my own)\b", re.I)
_DONE_QA = re.compile(r"\b(makes sense|understand now|got it|finish on my own|that helps)\b", re.I)


def _rate(ctx: Mapping[str, Any]) -> dict[str, Any]:
    pairs = ctx.get("transcript") or []
    replies = [t for r, t in pairs if r == "assistant"]
    asks = [t for r, t in pairs if r == "user"]
    lengths = [ntokens(t) for t in replies] or [0]
    mean_len = sum(lengths) / len(lengths)
    long_share = sum(1 for n in lengths if n > 150) / len(lengths)
    confused = sum(1 for t in asks if _HEDGE.search(t)) / max(1, len(asks))
    tries = sum(1 for t in asks if _ATTEMPT.search(t)) / max(1, len(asks))
    calibration = max(0.05, min(1.0, 1.0 - abs(mean_len - 70.0) / 250.0 - 0.3 * confused))
    overload = max(0.0, min(1.0, 0.7 * long_share + 0.3 * confused))
    quality = 1.0 + 9.0 * (0.6 * calibration + 0.4 * (1.0 - overload))
    learning = 1.0 + 9.0 * max(0.0, min(1.0, 0.5 * tries + 0.5 * (1.0 - confused)))
    return {
        "information_calibration": round(calibration, 2),
        "perceived_overload": round(overload, 2),
        "quality_score": round(quality, 1),
        "perceived_learning": round(learning, 1),
        "ic_reasoning": f"Tutor replies average {mean_len:.0f} words; the learner sounded confused in {confused:.0%} of turns.",
        "po_reasoning": f"{long_share:.0%} of the tutor's replies are long (over 150 words).",
        "quality_reasoning": "Combines how well the replies were sized with how rarely they overloaded the learner.",
        "pl_reasoning": f"The learner attempted steps in {tries:.0%} of turns.",
    }


def _terminate(ctx: Mapping[str, Any]) -> dict[str, Any]:
    pairs = ctx.get("transcript") or []
    asks = [t for r, t in pairs if r == "user"]
    task = ctx.get("task")
    done_re, done, stall = (
        (_DONE_MATH, "problem_completion", "circular_queries")
        if task == "math"
        else (_DONE_QA, "comprehension_satisfied", "unproductive_stalling")
    )
    analysis, end, reason = [], len(asks), "max_turns"
    for k, text in enumerate(asks, 1):
        progress = "improving"
        if k > 1 and set(words(text)) and set(words(text)) == set(words(asks[k - 2])):
            progress = "stalled"
        analysis.append({"turn": k, "summary": " ".join(text.split()[:20]), "progress": progress})
    for k, text in enumerate(asks, 1):
        if done_re.search(text):
            end, reason = k, done
            break
        if analysis[k - 1]["progress"] == "stalled":
            end, reason = k, stall
            break
    return {"turn_analysis": analysis, "ending_turn": max(1, end), "termination_reason": reason}


# --- graph extraction -------------------------------------------------------------------------


def _extract_graph(ctx: Mapping[str, Any]) -> dict[str, Any]:
    source = ctx.get("reference_answer") or ctx.get("question") or ""
    pieces = [s for s in sentences(source) if words(s)]
    if len(pieces) < 10:
        finer = [p.strip() for s in pieces for p in re.split(r";\s+|,\s+(?:and|so|then)\s+", s) if words(p)]
        pieces = finer if len(finer) > len(pieces) else pieces
    cap = 12 if ctx.get("attempt") == "compact" else 30
    pieces = pieces[:cap] or [ctx.get("question") or "The question"]
    k = len(pieces)
    step = min(0.3, 0.8 / max(1, k - 1))
    nodes, edges = [], []
    for i, text in enumerate(pieces):
        head = " ".join(text.split()[:6]).rstrip(".,;:")
        nodes.append(
            {"id": f"IU{i + 1}", "concept": head or f"Step {i + 1}", "abstraction_level": round(0.9 - i * step, 3), "description": text}
        )
        if i:
            edges.append(
                {"from": f"IU{i}", "to": f"IU{i + 1}", "delta_l": round(step, 3), "reason": "Each step of the answer builds on the one before."}
            )
    areas = sorted({w for w in words(ctx.get("question", "")) if len(w) > 5})[:3] or ["general"]
    return {"knowledge_areas": areas, "nodes": nodes, "edges": edges}


__all__ = ["GraphVocabulary", "OfflineError", "OfflineModel", "sentences", "vocabulary", "words"]
