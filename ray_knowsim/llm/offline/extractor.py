"""The offline signal extractor: labels from IDF-weighted word overlap and attempt markers."""

from __future__ import annotations

from typing import Any, Mapping

from ray_knowsim.llm.offline.graphs import vocabulary
from ray_knowsim.llm.offline.words import (
    _ATTEMPT,
    _HEDGE,
    _RESTATE,
    TOUCH_CONCEPT_AT,
    TOUCH_COVERAGE_AT,
    _label,
    sentences,
    words,
)


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
