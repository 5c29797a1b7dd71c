"""How long a real model's answers are, per role, measured on recorded conversations.

The dry run's first estimate (no ``--from-run``) multiplies every request by a completion prior
(:data:`ray_knowsim.backends.registry.TYPICAL_COMPLETION`). A guessed prior misleads exactly where
the bill is: the extractor's answer is most of it once prompts are cached, and a guess of 60 tokens
per IU per turn was half of what a real model writes. So the shipped priors are measured on the
KnowSim authors' recorded conversations (``knowsim-ref/examples``: real-model learner messages,
extractor reports and judge verdicts), and a test re-measures them here so they cannot drift from
the data. Anyone with their own recorded answers (the same record format) can measure theirs.

How each answer is rebuilt and counted, tokens = ``ceil(characters / 4)`` (the estimate's proxy):

* ``extractor_per_iu``: each turn's report as the extractor is asked to write it
  (``{"iu_analysis": [...]}`` with :class:`~ray_knowsim.schema.outputs.SignalEntryOut`'s fields,
  ``json.dumps``), summed over turns and divided by the IU entries written.
* ``judge``: every rating (``judged_metrics``, ``judged_metrics_at_early_stop``) with
  :class:`~ray_knowsim.schema.outputs.InteractionRating`'s fields.
* ``judge_termination``: a baseline's termination verdict (turn analysis, ending turn, reason).
* ``user_sim``: each learner message in the learner's JSON answer. The release keeps the message
  only, not the private ``thought`` a structured learner also writes; the prior assumes a thought
  as long as its message (:data:`THOUGHT_PER_MESSAGE`; the learner prompt's own examples have
  them about equal). A baseline learner that writes no thought is over-estimated by it.
* ``assistant:<strategy>``: the tutor's replies, per strategy (reported, not a backend prior:
  the tutor is the model under test, and each strategy ships its own expected length).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any, Iterable, Mapping

from ray_knowsim.schema.outputs import InteractionRating, SignalEntryOut, TerminationJudgement

CHARS_PER_TOKEN = 4
#: the learner's private thought, in characters per character of its message (see the module notes)
THOUGHT_PER_MESSAGE = 1.0
RATING_KEYS = ("judged_metrics", "judged_metrics_at_early_stop")


def _tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _fields(model: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in model.model_fields if k in data}


def learner_answer(message: str) -> dict[str, Any]:
    """A structured learner's whole answer around a recorded message (its thought assumed)."""
    thought = "x" * int(round(len(message) * THOUGHT_PER_MESSAGE))
    return {"thought": thought, "message": message, "attempt_verify": False, "terminate": False}


def answer_samples(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per role, (answer tokens, answers) summed over ``records``; the extractor's in IU entries."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def add(role: str, tokens: float, n: float = 1.0) -> None:
        out[role][0] += tokens
        out[role][1] += n

    for rec in records:
        for speaker, text in rec.get("conversation") or []:
            if speaker == "user":
                add("user_sim", _tokens(learner_answer(text)))
            elif speaker == "assistant":
                add(f"assistant:{rec.get('assistant_strategy')}", _tokens(text))
        for turn in rec.get("iu_analysis_history") or []:
            if turn:
                add("extractor_per_iu", _tokens({"iu_analysis": [_fields(SignalEntryOut, e) for e in turn]}), len(turn))
        for key in RATING_KEYS:
            if rec.get(key):
                add("judge", _tokens(_fields(InteractionRating, rec[key])))
        if rec.get("judged_turn_analysis") is not None:
            verdict = {"turn_analysis": rec["judged_turn_analysis"], "ending_turn": rec.get("judged_end_turn"),
                       "termination_reason": rec.get("judged_termination_reason")}
            add("judge_termination", _tokens(_fields(TerminationJudgement, verdict)))
    return {role: (tok, n) for role, (tok, n) in out.items()}


def measured_priors(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Mean completion tokens per answer per role (the extractor's per IU entry) in ``records``."""
    return {role: tok / n for role, (tok, n) in answer_samples(records).items() if n}


__all__ = ["THOUGHT_PER_MESSAGE", "answer_samples", "learner_answer", "measured_priors"]
