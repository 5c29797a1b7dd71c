"""The simulator audit: where a session's learner or extractor contradicts the session's own state.

Every number of a run rests on two models the tool does not control: the learner that writes the
user's turns from its knowledge state, and the extractor that labels each IU after every tutor
reply. This module reads one session's recorded rows (no model, no Ray, no I/O) and flags each
place where they contradict what the run itself recorded, with the sentence and the IU as
evidence. The kinds (:data:`FLAG_KINDS`):

* ``learner_claims_unaware`` — the learner says it understands an IU (by the IU's own wording in
  the graph) that its state before the turn holds ``unaware``;
* ``learner_uses_unaware`` — it works with such an IU without any sign of confusion (the
  simulator's rules require one whenever it touches an unaware IU);
* ``learner_reveals_answer`` — it writes the item's final answer, or a run of the reference
  solution's wording, before any tutor reply held it and while some IU is still unaware or
  struggling (baselines, which have no state: before any tutor reply held it);
* ``learner_stop_contradicts_state`` — it announces that it is done while some IU is unaware or
  struggling, or that it is overwhelmed while no turn of the last three was overloaded;
* ``extractor_unsupported_label`` — an IU labelled ``well_explained`` that the reply never
  touches (it does not name it, and carries under :data:`~.wording.UNTOUCHED_SHARE` of its wording);
* ``extractor_ignores_covered`` — an IU labelled ``not_mentioned`` that the reply covers at
  length (at least :data:`~.wording.AT_LENGTH_SHARE` of its wording, its concept named);
* ``extractor_constant_labels`` — one label vector for every answer of a session (at least
  :data:`MIN_CONSTANT_ANSWERS`) while the replies change which IUs they carry at length.

State checks apply to structured sessions (baselines hold no state); the answer check to all.
Lexical matching errs towards missing paraphrases: a flag is evidence to read, not a verdict;
its sentence is quoted so a person can judge it in the viewer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from ray_knowsim.audit.wording import (
    AT_LENGTH_SHARE,
    CARRY_SHARE,
    CLAIM,
    CONFUSION,
    RESTATE,
    STOP_DONE,
    STOP_OVERWHELMED,
    IUWords,
    about,
    best_sentence,
    content_words,
    graph_words,
    mostly_from,
    sentences,
    shared_ngrams,
)
from ray_knowsim.prompts.overlap import words as run_words
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.states import PARTIAL, STRUGGLING, UNAWARE, state_name

Party = Literal["learner", "extractor"]
FlagKind = Literal[
    "learner_claims_unaware", "learner_uses_unaware", "learner_reveals_answer", "learner_stop_contradicts_state",
    "extractor_unsupported_label", "extractor_ignores_covered", "extractor_constant_labels",
]  # fmt: skip
#: kind -> (the party at fault, what it means in a few words)
FLAG_KINDS: dict[str, tuple[Party, str]] = {
    "learner_claims_unaware": ("learner", "claims to understand an IU its state holds unaware"),
    "learner_uses_unaware": ("learner", "uses an IU its state holds unaware, with no sign of confusion"),
    "learner_reveals_answer": ("learner", "writes the answer or the solution's reasoning it should not have"),
    "learner_stop_contradicts_state": ("learner", "announces an end its state contradicts"),
    "extractor_unsupported_label": ("extractor", "labels well_explained an IU the reply never touches"),
    "extractor_ignores_covered": ("extractor", "labels not_mentioned an IU the reply covers at length"),
    "extractor_constant_labels": ("extractor", "gives the same labels whatever the reply says"),
}
#: answers of a session before constant labels are judged
MIN_CONSTANT_ANSWERS = 3
#: a sentence that LEANS towards an IU this much, more than to any other, touches it: a
#: well_explained label on it is no unsupported label, and a claim in it is a claim about that IU
LEANING_SHARE = 0.08
#: IUs an answer must label before one label for all of them is judged
MIN_UNIFORM_IUS = 4
#: words in a run shared with the reference solution before it counts as revealed reasoning
REVEAL_RUN_WORDS = 8
#: characters a final answer needs before the learner's message is searched for it anywhere
#: (a shorter one counts only where a final answer stands: :func:`states_answer`)
MIN_ANSWER_CHARS = 2
#: the turns before a learner's "too much" that an overload must be among
OVERLOAD_LOOKBACK = 3


class AuditFlag(BaseModel):
    """One place where the simulator contradicts the session's state, with its evidence."""

    model_config = ConfigDict(extra="forbid")
    session_id: str
    turn: int  # 1-based; the turn whose message or label is flagged
    kind: FlagKind
    party: Party
    iu: str = ""  # the IU id ("" when the flag is about no one IU)
    concept: str = ""
    state: str = ""  # the IU's state before the turn (learner flags), or ""
    label: str = ""  # the extractor's label (extractor flags), or ""
    evidence: str  # the sentence (or phrase) that contradicts the state, as written
    why: str  # one sentence: what contradicts what


@dataclass(frozen=True)
class TurnFacts:
    turn: int
    user_message: str
    assistant_message: str
    signals: Sequence[Mapping[str, Any]] = ()  # the extractor's entries (spec §1.5), empty for baselines
    states: Sequence[int] = ()  # post-turn, graph node order
    overload: bool = False


@dataclass(frozen=True)
class SessionFacts:
    session_id: str
    graph: IUGraph
    initial_states: Sequence[int]
    structured: bool
    problem: str = ""
    answer: str = ""  # the reference answer / solution ("" when unknown: the answer check is skipped)
    turns: Sequence[TurnFacts] = field(default_factory=tuple)


def final_answer(solution: str) -> str:
    """The last ``\\boxed{...}`` of a MATH solution, normalised (:func:`normal_math`); "" if none."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return ""
    depth, k = 0, start + len("\\boxed")
    for j in range(k, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            return normal_math(solution[k + 1 : j])
    return ""


_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")


def normal_math(text: str) -> str:
    """Math text compared as written without spaces, ``$`` or ``\\left``/``\\right``; fractions as a/b."""
    text = _FRAC.sub(r"\1/\2", text)
    return re.sub(r"\s+|\$|\\left|\\right|\\,|\\!", "", text).strip(".")


def _holds_answer(text: str, answer: str) -> bool:
    if not answer:
        return False
    norm = re.sub(r"\$|\\left|\\right|\\,|\\!", "", _FRAC.sub(r"\1/\2", text))
    body = r"\s*".join(re.escape(ch) for ch in answer)  # the text may space what the answer does not
    return re.search(r"(?<![\w./])" + body + r"(?![\w/]|\.\d)", norm) is not None


def audit_session(facts: SessionFacts) -> list[AuditFlag]:
    """Every flag of one session (see the module docstring), in turn order."""
    ids = [n.id for n in facts.graph.nodes]
    ius = graph_words(facts.graph, facts.problem, facts.answer)
    # the tutor's replies are read with the question's words too: a reply that teaches an IU in
    # the words of the question ("at most 2 means ...") still teaches it
    reply_ius = graph_words(facts.graph, "", facts.answer)
    flags: list[AuditFlag] = []
    states = list(facts.initial_states) if len(facts.initial_states) == len(ids) else []
    problem_words = content_words(facts.problem)
    boxed = final_answer(facts.answer) if "\\boxed" in facts.answer else ""
    reference_words = run_words(facts.answer) if facts.answer else []
    told: list[str] = []  # the tutor's replies so far (before the turn's learner message)
    for k, t in enumerate(facts.turns):
        before = dict(zip(ids, states)) if facts.structured and states else {}
        if before:
            flags += _learner_state_flags(facts.session_id, t, before, ius, problem_words, told[-1] if told else "")
            flags += _stop_flags(facts.session_id, t, before, ius, facts.turns[max(0, k - OVERLOAD_LOOKBACK) : k])
        flags += _answer_flags(facts.session_id, t, before, ius, boxed, reference_words, facts.problem, told)
        if facts.structured and t.signals:
            flags += _label_flags(facts.session_id, t, reply_ius)
        told.append(t.assistant_message)
        if len(t.states) == len(ids):
            states = list(t.states)
    if facts.structured:
        flags += _constant_label_flags(facts.session_id, facts.turns, reply_ius)
    return flags


def _learner_state_flags(sid: str, t: TurnFacts, before: Mapping[str, int], ius: Mapping[str, IUWords],
                         problem_words: frozenset[str], last_reply: str) -> list[AuditFlag]:
    unaware = [ius[i] for i, s in before.items() if s == UNAWARE and i in ius and ius[i].judgeable]
    if not unaware:
        return []
    known = [ius[i] for i, s in before.items() if s != UNAWARE and i in ius]
    reply_words = content_words(last_reply)
    out: list[AuditFlag] = []
    seen: set[str] = set()
    for sentence in sentences(t.user_message):
        sw = content_words(sentence)
        if not sw or mostly_from(sw, problem_words):
            continue  # the learner quotes the question
        confused = CONFUSION.search(sentence) is not None
        claims = CLAIM.search(sentence) is not None and not confused
        asks = sentence.rstrip().endswith("?") and not claims
        restates = RESTATE.search(sentence) is not None and mostly_from(sw, reply_words, 0.6)
        if not claims and (confused or asks or restates):
            continue
        # the words of IUs the learner may know that the sentence names are not evidence about another IU
        topic = about(sentence, ius)  # the IU the sentence is most about, if clearly one
        if claims and not any(k.named(sw) for k in ius.values()):
            # a claim that names no IU says what it claims in few words: the IU it leans to most is the one claimed
            topic = about(sentence, ius, least=LEANING_SHARE, margin=1.0)
        own = sw - frozenset(w for k in known if k.named(sw) or k.id in topic for w in k.weights)
        for iu in unaware:
            if iu.id in seen or not (iu.touched(own) or iu.id in topic or (claims and iu.named(own, full=True))):
                continue
            seen.add(iu.id)
            kind = "learner_claims_unaware" if claims else "learner_uses_unaware"
            out.append(AuditFlag(
                session_id=sid, turn=t.turn, kind=kind, party="learner", iu=iu.id, concept=iu.concept,
                state="unaware", evidence=sentence,
                why=f"the learner {'claims to understand' if claims else 'works with'} {iu.id} ({iu.concept}) "
                    "with no sign of confusion, but its state before the turn holds it unaware",
            ))  # fmt: skip
    return out


def _stop_flags(sid: str, t: TurnFacts, before: Mapping[str, int], ius: Mapping[str, IUWords],
                previous: Sequence[TurnFacts]) -> list[AuditFlag]:
    out: list[AuditFlag] = []
    for sentence in sentences(t.user_message):
        if STOP_DONE.search(sentence) and not CONFUSION.search(sentence):
            behind = [i for i, s in before.items() if s <= STRUGGLING]
            if behind:
                names = ", ".join(f"{i} {state_name(before[i])}" for i in behind[:4]) + (" ..." if len(behind) > 4 else "")
                out.append(AuditFlag(
                    session_id=sid, turn=t.turn, kind="learner_stop_contradicts_state", party="learner",
                    iu=behind[0], concept=ius[behind[0]].concept if behind[0] in ius else "", state=state_name(before[behind[0]]),
                    evidence=sentence, why=f"the learner says it is done while {len(behind)} IU(s) are unaware or struggling ({names})",
                ))  # fmt: skip
                break
        if STOP_OVERWHELMED.search(sentence) and previous and not any(p.overload for p in previous):
            out.append(AuditFlag(
                session_id=sid, turn=t.turn, kind="learner_stop_contradicts_state", party="learner", evidence=sentence,
                why=f"the learner says it is overwhelmed, but none of the {len(previous)} turn(s) before was overloaded",
            ))  # fmt: skip
            break
    return out


_ASKED = re.compile(r"\b(?:what is|what's|find|compute|determine|how (?:many|much) is)\s+the\s+(?:final\s+)?([a-z]+)", re.I)
_STATES = r"(?:is|=|equals|would be|should be|must be|will be|comes? out (?:to|as)|works? out (?:to|as))"


def asked_noun(problem: str) -> str:
    """The quantity the question asks for ("radius", "remainder"): a learner who writes "the
    radius is 3" states the final answer, one who writes "3 cm" in a sum does not."""
    found = _ASKED.findall(problem or "")
    return found[-1].lower() if found else ""


def states_answer(text: str, answer: str, asked: str = "") -> str:
    """The sentence of ``text`` that states ``answer`` AS the final answer ("" if none): boxed,
    "the (final) answer is", "the <asked quantity> is", or the message's last sentence ending on it
    ("so it's 3."). For an answer too short to be searched anywhere (a one-character "3" turns up in
    any working), only these positions count."""
    if not answer:
        return ""
    body = r"\s*".join(re.escape(ch) for ch in answer)
    tail = r"\$?\s*" + body + r"(?![\w/]|\.\d|\s*[+\-*/^×=]|\s+(?:times|plus|minus|more|less|over|of)\b)"
    lead = [r"\\+boxed\{\s*" + body + r"\s*\}", r"\banswer(?:'s| is)?\s*(?:" + _STATES + r"|:)?\s*(?:just |then |probably )?" + tail]
    if asked:
        lead.append(r"\b" + re.escape(asked) + r"\w*(?: [\w()^]+){0,4}? " + _STATES + r"\s*(?:just |then |probably )?" + tail)
    parts = sentences(text)
    for sentence in parts:
        norm = re.sub(r"\\left|\\right|\\,|\\!", "", _FRAC.sub(r"\1/\2", sentence))
        if any(re.search(p, norm, re.I) for p in lead):
            return sentence
    last = re.sub(r"\\left|\\right|\\,|\\!", "", _FRAC.sub(r"\1/\2", parts[-1])) if parts else ""
    bare = r"(?:^|\b(?:it'?s|it is|that'?s|that is|we get|i get|i got|gives?|get)\s+)" + tail + r"\$?\s*[.!?]*$"
    return parts[-1] if last and re.search(bare, last.strip(), re.I) else ""


def _answer_flags(sid: str, t: TurnFacts, before: Mapping[str, int], ius: Mapping[str, IUWords], boxed: str,
                  reference_words: Sequence[str], problem: str, told: Sequence[str]) -> list[AuditFlag]:
    if not (boxed or reference_words):
        return []
    behind = [i for i, s in before.items() if s < PARTIAL]
    if before and not behind:
        return []  # a learner whose state holds every IU may well reach the answer
    state_text = f" while {len(behind)} IU(s) are unaware or struggling" if before else ""
    context = " ".join([problem, *told])
    asked = asked_noun(problem)
    short = len(boxed) < MIN_ANSWER_CHARS  # "3": searched only where a final answer stands
    told_it = any(states_answer(r, boxed, asked) for r in told) if short else _holds_answer(context, boxed)
    for sentence in sentences(t.user_message) if boxed and not told_it else ():
        # an IU the learner holds at least partly may BE the result ("The remainder is 1"): naming it is no reveal
        names_known = any(before.get(i, UNAWARE) >= PARTIAL and _holds_answer(iu.concept, boxed)
                          and iu.named(content_words(sentence), full=True) for i, iu in ius.items())
        stated = states_answer(t.user_message, boxed, asked) == sentence if short else _holds_answer(sentence, boxed)
        if stated and not names_known:
            return [AuditFlag(session_id=sid, turn=t.turn, kind="learner_reveals_answer", party="learner", evidence=sentence,
                              why=f"the learner writes the final answer {boxed!r} before any tutor reply held it{state_text}")]
    # a run of the solution's wording, not a list of its numbers ("(2,6), (3,5), ..." is working)
    given = {g for g in shared_ngrams(run_words(t.user_message), reference_words, REVEAL_RUN_WORDS)
             if sum(w.isalpha() for w in g) >= REVEAL_RUN_WORDS // 2}
    if given:
        given -= shared_ngrams(run_words(t.user_message), run_words(context), REVEAL_RUN_WORDS)
    if given:
        phrase = " ".join(sorted(given)[0])
        return [AuditFlag(session_id=sid, turn=t.turn, kind="learner_reveals_answer", party="learner", evidence=phrase,
                          why=f"the learner writes {REVEAL_RUN_WORDS}+ words of the reference solution that neither the "
                              f"question nor any tutor reply held{state_text}")]  # fmt: skip
    return []


def _label(entry: Mapping[str, Any]) -> str:
    raw = str(entry.get("teaching_quality"))
    return raw if raw in ("not_mentioned", "shallow") else "well_explained"


def _label_flags(sid: str, t: TurnFacts, ius: Mapping[str, IUWords]) -> list[AuditFlag]:
    reply = content_words(t.assistant_message)
    topic = about(t.assistant_message, ius)
    # the IUs any sentence is most about, however little of them it carries: never "untouched"
    leaning = about(t.assistant_message, ius, least=LEANING_SHARE, margin=1.0)
    out: list[AuditFlag] = []
    for entry in t.signals:
        iu = ius.get(str(entry.get("id")))
        if iu is None or not iu.judgeable:
            continue
        label = _label(entry)
        share = round(100 * iu.share(reply))
        if label == "well_explained" and iu.untouched(reply) and iu.id not in leaning:
            reason = str(entry.get("teaching_quality_reasoning") or "")
            out.append(AuditFlag(
                session_id=sid, turn=t.turn, kind="extractor_unsupported_label", party="extractor", iu=iu.id,
                concept=iu.concept, label=label, evidence=reason or "(no reasoning given)",
                why=f"{iu.id} ({iu.concept}) is labelled well_explained, but the reply does not name it ({len(iu.concept_words & reply)} "
                    f"of its concept's {len(iu.concept_words)} words), carries {share}% of its wording "
                    f"({iu.matched(reply) or 'nothing'}) and no sentence of it is about {iu.id}",
            ))  # fmt: skip
        elif label == "not_mentioned" and (iu.covered(reply) or iu.id in topic):
            how = ("names it and " if iu.named(reply) else "") + f"carries {share}% of its wording"
            if iu.id in topic and not iu.covered(reply):
                how += f", and this sentence is more about {iu.id} than any other IU"
            out.append(AuditFlag(
                session_id=sid, turn=t.turn, kind="extractor_ignores_covered", party="extractor", iu=iu.id,
                concept=iu.concept, label=label, evidence=topic.get(iu.id) or best_sentence(t.assistant_message, iu),
                why=f"{iu.id} ({iu.concept}) is labelled not_mentioned, but the reply {how} ({iu.matched(reply)})",
            ))  # fmt: skip
    return out + _uniform_label_flags(sid, t, ius, reply, topic)


def _uniform_label_flags(sid: str, t: TurnFacts, ius: Mapping[str, IUWords], reply: frozenset[str],
                         topic: Mapping[str, str]) -> list[AuditFlag]:
    """One label for every IU of one answer while the reply teaches some IUs and leaves others
    untouched: the answer cannot have read the reply (an extractor that stalls does this in a
    single answer, not only in all of them)."""
    labels = {str(e.get("id")): _label(e) for e in t.signals if str(e.get("id")) in ius}
    if len(labels) < MIN_UNIFORM_IUS or len(set(labels.values())) != 1:
        return []
    label = next(iter(labels.values()))
    taught = sorted(i for i in labels if ius[i].judgeable and (ius[i].covered(reply) or i in topic))
    absent = sorted(i for i in labels if ius[i].judgeable and ius[i].untouched(reply) and i not in topic)
    if not taught or not absent:
        return []
    return [AuditFlag(
        session_id=sid, turn=t.turn, kind="extractor_constant_labels", party="extractor", iu=taught[0],
        concept=ius[taught[0]].concept, label=label, evidence=topic.get(taught[0]) or best_sentence(t.assistant_message, ius[taught[0]]),
        why=f"every one of the {len(labels)} IUs is labelled {label}, but the reply teaches {', '.join(taught[:4])} "
            f"and leaves {', '.join(absent[:4])}{' ...' if len(absent) > 4 else ''} untouched",
    )]  # fmt: skip


def _constant_label_flags(sid: str, turns: Sequence[TurnFacts], ius: Mapping[str, IUWords]) -> list[AuditFlag]:
    answered = [t for t in turns if t.signals]
    if len(answered) < MIN_CONSTANT_ANSWERS:
        return []
    vectors = {tuple((str(e.get("id")), _label(e)) for e in t.signals) for t in answered}
    if len(vectors) != 1:
        return []
    carried = [{i for i, iu in ius.items() if iu.judgeable and iu.share(content_words(t.assistant_message)) >= AT_LENGTH_SHARE}
               for t in answered]
    barely = [{i for i, iu in ius.items() if iu.share(content_words(t.assistant_message)) < CARRY_SHARE / 3} for t in answered]
    # an IU carried at length in one reply and all but absent from another: the text changed, the labels did not
    moved = sorted({i for a in range(len(answered)) for b in range(len(answered)) for i in carried[a] & barely[b]})
    if not moved:
        return []
    labels = ", ".join(f"{i}: {lab}" for i, lab in next(iter(vectors))[:4]) + (" ..." if len(next(iter(vectors))) > 4 else "")
    carried_text = "; ".join(f"turn {t.turn}: {', '.join(sorted(c)) or 'none'}" for t, c in zip(answered, carried))
    return [AuditFlag(
        session_id=sid, turn=answered[-1].turn, kind="extractor_constant_labels", party="extractor", iu=moved[0],
        concept=ius[moved[0]].concept, label=_label(answered[0].signals[0]), evidence=f"labels in every answer: {labels}",
        why=f"the extractor gave the same labels in all {len(answered)} answers while the replies carried different IUs "
            f"at length ({carried_text})",
    )]  # fmt: skip


__all__ = [
    "FLAG_KINDS", "MIN_CONSTANT_ANSWERS", "OVERLOAD_LOOKBACK", "REVEAL_RUN_WORDS", "AuditFlag", "FlagKind", "Party",
    "SessionFacts", "TurnFacts", "asked_noun", "audit_session", "final_answer", "normal_math", "states_answer",
]  # fmt: skip
