"""Sessions over the demo maths items at the density real errors have, written from the
hand-made paraphrases (tests/doubles/audit_paraphrases.py), without Ray or a model.

A clean session: the tutor teaches one or two IUs a turn in other words than the graph's, the
extractor labels what was taught (and shallow what the reply cannot help touching), the state
moves up for what was taught, and the learner either asks about an IU it does not know, works
with one it knows, or says a neutral line. A planted session is the same session with one kind of
error in one or two turns, never consecutive ones. Seeded: the same seed gives the same sessions.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from ray_knowsim.audit.checks import SessionFacts, TurnFacts, final_answer
from ray_knowsim.demo import demo_graphs
from ray_knowsim.schema.states import KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE
from tests.doubles.audit_paraphrases import PARAPHRASES

ITEMS = {row["id"]: row for row in map(json.loads, (Path(__file__).resolve().parents[2] / "ray_knowsim/demo/math.jsonl").read_text().splitlines())}
#: planted kind -> the audit kinds that count as finding it
KINDS = {
    "learner_claims_unaware": {"learner_claims_unaware", "learner_uses_unaware"},
    "learner_uses_unaware": {"learner_uses_unaware", "learner_claims_unaware"},
    "learner_reveals_answer": {"learner_reveals_answer"},
    "learner_stop_contradicts_state": {"learner_stop_contradicts_state"},
    "extractor_unsupported_label": {"extractor_unsupported_label"},
    "extractor_ignores_covered": {"extractor_ignores_covered"},
    "extractor_constant_labels": {"extractor_constant_labels"},
}
ASKS = ["I'm not sure about {g} yet; could you show me how that part works?", "What do you mean by {g}? I'm lost there.",
        "I don't get {g} at all, can you explain it?"]
NEUTRAL = ["Okay, let me think about that for a second.", "Alright, that helps a bit.", "Hmm, okay, go on."]
CLAIMS = ["I already understand {g}, so that part is fine.", "{G} makes sense to me.", "I'm comfortable with {g}.",
          "I know {g} already."]
LEAKS = ["I think the final answer is {a}.", "Is it just $\\boxed{{{a}}}$?", "So the {asked} is {a}, right?",
         "I tried it on my own and I get {a}."]
STOPS = ["Thanks, I think I've got it and can finish the rest myself.", "That's all I need, I can solve it from here.",
         "Great, everything makes sense now, I'm done."]
REPLY_OPEN = ["Good question.", "Let's take the next step.", "Here is the idea."]
REPLY_CLOSE = ["Does that make sense?", "Try the next step and tell me what you get.", "What would you do next?"]


@dataclass
class Planted:
    facts: SessionFacts
    kind: str = ""  # "" for a clean session
    turns: list[int] = field(default_factory=list)  # the turns that carry a plant


def _reply(rng: random.Random, item: str, taught: list[str]) -> str:
    body = " ".join(PARAPHRASES[item][i]["tutor"] for i in taught)
    return f"{rng.choice(REPLY_OPEN)} {body} {rng.choice(REPLY_CLOSE)}"


def _labels(item: str, ids: list[str], taught: list[str]) -> list[dict]:
    touched = {a for i in taught for a in PARAPHRASES[item][i]["also"]}
    return [{"id": i, "teaching_quality": "well_explained" if i in taught else "shallow" if i in touched else "not_mentioned",
             "teaching_quality_reasoning": "(planted-session label)"} for i in ids]


def _learner(rng: random.Random, item: str, state: dict[str, int], last_taught: list[str]) -> str:
    unknown = [i for i, s in state.items() if s == UNAWARE]
    known = [i for i, s in state.items() if s >= PARTIAL and i not in ("IU13",)]
    roll = rng.random()
    if roll < 0.4 and unknown:
        return rng.choice(ASKS).format(g=PARAPHRASES[item][rng.choice(unknown)]["gist"])
    if roll < 0.7 and known:
        return PARAPHRASES[item][rng.choice(known)]["learner"]
    return rng.choice(NEUTRAL)


def _plant(rng: random.Random, kind: str, item: str, state: dict[str, int], taught: list[str], last: list[str],
           clean: tuple[str, list[dict]], told: str) -> tuple[str, list[dict]] | None:
    """The turn's learner message and labels (``clean``) with one error of ``kind``; None where it cannot go."""
    user, labels = clean
    free = [i for i, s in state.items() if s == UNAWARE and i not in last and i in PARAPHRASES[item]]
    if kind in ("learner_claims_unaware", "learner_uses_unaware"):
        if not free:
            return None
        p = PARAPHRASES[item][rng.choice(free)]
        text = rng.choice(CLAIMS).format(g=p["gist"], G=p["gist"][0].upper() + p["gist"][1:]) if kind == "learner_claims_unaware" else p["learner"]
        return text, labels
    if kind == "learner_reveals_answer":
        answer = final_answer(ITEMS[item]["solution"])
        if answer in told or all(s >= PARTIAL for s in state.values()):
            return None
        from ray_knowsim.audit.checks import asked_noun

        return rng.choice(LEAKS).format(a=answer, asked=asked_noun(ITEMS[item]["problem"]) or "answer"), labels
    if kind == "learner_stop_contradicts_state":
        return (rng.choice(STOPS), labels) if any(s <= STRUGGLING for s in state.values()) else None
    touched = {a for i in taught for a in PARAPHRASES[item][i]["also"]} | set(taught)
    if kind == "extractor_unsupported_label":
        pool = [e for e in labels if e["id"] not in touched]
        target = rng.choice(pool)["id"] if pool else None
        return (user, [dict(e, teaching_quality="well_explained") if e["id"] == target else e for e in labels]) if target else None
    if kind == "extractor_ignores_covered":
        target = rng.choice(taught)
        return user, [dict(e, teaching_quality="not_mentioned") if e["id"] == target else e for e in labels]
    one = rng.choice(["well_explained", "shallow", "not_mentioned"])
    return user, [dict(e, teaching_quality=one) for e in labels]


def session(seed: int, item: str, kind: str = "", n_turns: int = 6) -> Planted:
    """One session; with ``kind``, one or two plants of it on non-consecutive turns."""
    rng = random.Random(seed)
    graph = demo_graphs("math")[item]
    ids = [n.id for n in graph.nodes]
    state = {i: rng.choice([UNAWARE, UNAWARE, STRUGGLING, PARTIAL, KNOWS_WELL]) for i in ids}
    initial = [state[i] for i in ids]
    plan = sorted(rng.sample(range(2, n_turns + 1), 2)) if kind else []
    if plan and (plan[1] - plan[0] < 2 or rng.random() < 0.5):
        plan = plan[:1]  # one plant, or two never on consecutive turns
    turns, last, told, planted = [], [], "", []
    for k in range(1, n_turns + 1):
        user = _learner(rng, item, state, last) if k > 1 else "Can you help me get started with this problem?"
        todo = sorted((i for i in ids if state[i] < KNOWS_WELL and i != "IU13"), key=lambda i: (state[i], rng.random()))
        taught = todo[: rng.choice([1, 2])] or [ids[0]]
        labels = _labels(item, ids, taught)
        if k in plan:
            got = _plant(rng, kind, item, state, taught, last, (user, labels), told)
            if got is not None:
                user, labels = got
                planted.append(k)
        reply = _reply(rng, item, taught)
        for i in taught:
            state[i] = min(KNOWS_WELL, state[i] + 1)
        turns.append(TurnFacts(k, user, reply, labels, [state[i] for i in ids]))
        last, told = taught, told + " " + reply
    facts = SessionFacts(f"{item}/{kind or 'clean'}/{seed}", graph, initial, True, ITEMS[item]["problem"], ITEMS[item]["solution"], tuple(turns))
    return Planted(facts, kind if planted else "", planted)


def corpus(n_per_item: int = 6, items: tuple[str, ...] = tuple(PARAPHRASES)) -> list[Planted]:
    """Clean sessions and, per kind, planted ones over ``items`` (seeded by position)."""
    out = []
    for j, item in enumerate(items):
        for s in range(n_per_item):
            out.append(session(1000 * j + s, item))
            for kk, kind in enumerate(KINDS):
                out.append(session(1000 * j + 100 * (kk + 1) + s, item, kind))
    return out
