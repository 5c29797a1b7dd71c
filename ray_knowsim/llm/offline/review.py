"""The offline simulator review: a crude, honest reader of the simulator's record (TEST DOUBLE).

From the facts the renderer hands it (the graph, per exchange the learner's states before it, the
messages and the extractor's labels) it reports, with word overlap (graphs.GraphVocabulary):

* ``learner_claims_unaware`` / ``learner_uses_unaware`` — a learner sentence, not a question and
  with no confusion marker, that names an IU its state holds unaware (60 % of the concept's
  words) or carries 35 % of its wording; a claim when it says it understands or knows;
* ``extractor_unsupported_label`` — an IU labelled well_explained whose wording the reply carries
  under 25 % of, without naming it;
* ``extractor_ignores_covered`` — an IU labelled not_mentioned whose wording the reply carries at
  55 % or more.

Its rules are its own (not the audit's), so its agreement with the audit is a measurement, not
a copy. Evidence is always a sentence of the exchange, quoted exactly.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ray_knowsim.llm.offline.graphs import vocabulary
from ray_knowsim.llm.offline.words import (
    _HEDGE,
    SHALLOW_AT,
    TOUCH_CONCEPT_AT,
    TOUCH_COVERAGE_AT,
    WELL_EXPLAINED_AT,
    sentences,
    words,
)

_CLAIM = re.compile(r"\b(i understand|i already understand|i know|makes sense to me|is clear to me|i can apply)\b", re.I)


def _review(ctx: Mapping[str, Any]) -> dict[str, Any]:
    graph = ctx.get("graph")
    findings: list[dict[str, Any]] = []
    if not graph:
        return {"findings": [], "summary": "No idea list: nothing to check against."}
    vocab = vocabulary(graph)
    for turn, ex in enumerate(ctx.get("exchanges") or [], 1):
        states = ex.get("states") or {}
        for s in sentences(ex.get("user") or ""):
            if s.rstrip().endswith("?") or _HEDGE.search(s):
                continue
            sw = set(words(s))
            for v, state in states.items():
                if state != "unaware" or v not in vocab.ius:
                    continue
                if vocab.concept_hit(v, sw) >= TOUCH_CONCEPT_AT or vocab.coverage(v, sw) >= TOUCH_COVERAGE_AT:
                    kind = "learner_claims_unaware" if _CLAIM.search(s) else "learner_uses_unaware"
                    findings.append({"turn": turn, "party": "learner", "kind": kind, "iu": v, "severity": "helped_tutor",
                                     "evidence": s, "explanation": f"{v} ({vocab.ius[v].concept}) is unaware before this turn."})
                    break  # one finding per sentence
        reply = ex.get("assistant") or ""
        reply_sentences = sentences(reply)
        reply_words = set(words(reply))
        for v, (label, _attempt) in (ex.get("labels") or {}).items():
            if v not in vocab.ius or not reply_sentences:
                continue
            cov = vocab.coverage(v, reply_words)
            if label == "well_explained" and cov < SHALLOW_AT and vocab.concept_hit(v, reply_words) < TOUCH_CONCEPT_AT:
                findings.append({"turn": turn, "party": "extractor", "kind": "extractor_unsupported_label", "iu": v,
                                 "severity": "helped_tutor", "evidence": reply_sentences[0],
                                 "explanation": f"the reply carries {cov:.0%} of {v}'s wording, yet it is labelled well_explained."})
            elif label == "not_mentioned" and cov >= WELL_EXPLAINED_AT:
                best = max(reply_sentences, key=lambda s: vocab.coverage(v, set(words(s))))
                findings.append({"turn": turn, "party": "extractor", "kind": "extractor_ignores_covered", "iu": v,
                                 "severity": "hurt_tutor", "evidence": best,
                                 "explanation": f"the reply carries {cov:.0%} of {v}'s wording, yet it is labelled not_mentioned."})
    kinds = sorted({f["kind"] for f in findings})
    return {"findings": findings, "summary": f"{len(findings)} simulator error(s)" + (f": {', '.join(kinds)}." if kinds else ".")}
