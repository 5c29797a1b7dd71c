"""The judges: each is one object registered under a name in ``JUDGES``.

A judge says which transcripts it reads (:meth:`Judge.applies`), the request it sends, how its
answer is parsed, and the score columns the parsed answer fills. Adding one is a module with a
:class:`Judge` subclass and ``JUDGES.register("name", MyJudge())`` (see ``docs/extending.md``).
Values a judge returns under names that are not columns of :class:`~ray_knowsim.score.store.ScoreRow`
are kept in its ``extra_json`` column.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ray_knowsim.llm.parse import ParseResult, parse_rating, parse_termination
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.prompts.judges import render_rater, render_termination_judge
from ray_knowsim.registry import Registry
from ray_knowsim.score.transcripts import Transcript


class Judge:
    """Base class of a judge. ``slot`` separates the seeds and request ids of the judges of one
    session (the built-ins use 0 and 1, which is what the in-loop judges of earlier runs used)."""

    slot: int = 0
    #: whether it reads the simulator's own record (graph, states, labels: ``Transcript.graph_json`` & co.)
    reads_record: bool = False

    def applies(self, t: Transcript) -> bool:
        raise NotImplementedError

    def request(self, t: Transcript, *, seed: int, request_id: str) -> ChatRequest:
        raise NotImplementedError

    def parse(self, text: str, t: Transcript) -> ParseResult[Any]:
        raise NotImplementedError

    def values(self, value: Any, t: Transcript) -> dict[str, Any]:
        """Score columns from a parsed answer."""
        raise NotImplementedError


JUDGES: Registry[Judge] = Registry("judge", builtins=("ray_knowsim.score.judges",))


class InteractionQuality(Judge):
    """The Interaction Quality rater of every finished conversation (IQ 1-10 and friends)."""

    slot = 0

    def applies(self, t: Transcript) -> bool:
        return bool(t.messages)

    def request(self, t: Transcript, *, seed: int, request_id: str) -> ChatRequest:
        return render_rater(t.item, t.messages, knowledge_level=t.knowledge_level, seed=seed, request_id=request_id)

    def parse(self, text: str, t: Transcript) -> ParseResult[Any]:
        return parse_rating(text)

    def values(self, value: Any, t: Transcript) -> dict[str, Any]:
        return {
            "iq": value.quality_score,
            "judge_information_calibration": value.information_calibration,
            "judge_perceived_overload": value.perceived_overload,
            "judge_perceived_learning": value.perceived_learning,
        }


class Termination(Judge):
    """Where a baseline learner would have stopped (spec §8.1); structured sessions are skipped."""

    slot = 1

    def applies(self, t: Transcript) -> bool:
        return not t.structured and t.n_user > 0

    def request(self, t: Transcript, *, seed: int, request_id: str) -> ChatRequest:
        return render_termination_judge(t.item, t.messages, seed=seed, request_id=request_id)

    def parse(self, text: str, t: Transcript) -> ParseResult[Any]:
        return parse_termination(text, t.item.task, t.n_user)

    def values(self, value: Any, t: Transcript) -> dict[str, Any]:
        end = int(value.ending_turn)
        if end < t.n_user:
            return {"judge_early_stop_turn": end, "judge_early_stop_reason": value.termination_reason}
        return {}


class SimulatorReviewJudge(Judge):
    """The optional LLM review of the simulator (schema/review.py): the learner's and the
    extractor's errors, each with its severity and evidence quoted from the transcript. It reads
    the simulator's record (the states before each turn and the extractor's labels), which the
    deterministic audit reads too (score/review.py compares the two)."""

    slot = 2
    reads_record = True

    def applies(self, t: Transcript) -> bool:
        return bool(t.messages)

    def exchanges(self, t: Transcript) -> list[dict[str, Any]]:
        """Per turn: the learner's message, the tutor's reply ("" after a closing message), the
        states before it ({IU id: name}; None without a record) and the extractor's labels."""
        from ray_knowsim.tables.sanity import _entries as signal_entries  # the one reader of an extractor answer's entries
        from ray_knowsim.schema.states import state_name

        graph = _recorded_graph(t.graph_json)
        ids = [n.id for n in graph.nodes] if graph is not None else []
        texts: list[tuple[str, str]] = []
        i, pairs = 0, t.messages
        while i < len(pairs):
            user = pairs[i][1] if pairs[i][0] == "user" else ""
            i += pairs[i][0] == "user"
            reply = ""
            if i < len(pairs) and pairs[i][0] == "assistant":
                reply, i = pairs[i][1], i + 1
            texts.append((user or "", reply or ""))
        out: list[dict[str, Any]] = []
        for turn, (user, reply) in enumerate(texts):
            before = t.initial_states if turn == 0 else (t.turn_states[turn - 1] if turn - 1 < len(t.turn_states) else ())
            states = {i: state_name(v) for i, v in zip(ids, before)} if t.structured and ids and len(before) == len(ids) else None
            labels = None
            if reply and turn < len(t.turn_signals):
                labels = {str(e["id"]): (_label(e.get("teaching_quality")), str(e.get("user_attempt_type") or "none"))
                          for e in signal_entries(t.turn_signals[turn]) if e.get("id")} or None
            out.append({"user": user, "assistant": reply, "states": states, "labels": labels})
        return out

    def request(self, t: Transcript, *, seed: int, request_id: str) -> ChatRequest:
        from ray_knowsim.prompts.judges import render_simulator_review

        return render_simulator_review(t.item, _recorded_graph(t.graph_json), self.exchanges(t), seed=seed, request_id=request_id)

    def parse(self, text: str, t: Transcript) -> ParseResult[Any]:
        from ray_knowsim.llm.parse.review import parse_review

        return parse_review(text, [(ex["user"], ex["assistant"]) for ex in self.exchanges(t)])

    def values(self, value: Any, t: Transcript) -> dict[str, Any]:
        from ray_knowsim.llm.parse.review import quoted_in

        exchanges = self.exchanges(t)
        findings = [f.model_dump() | {"quoted": quoted_in(f.evidence, (exchanges[f.turn - 1]["user"], exchanges[f.turn - 1]["assistant"]))}
                    for f in value.findings]
        return {
            "review_findings": findings,
            "review_n_findings": len(findings),
            **{f"review_n_{party}": sum(f["party"] == party for f in findings) for party in ("learner", "extractor")},
            **{f"review_{sev}": sum(f["severity"] == sev for f in findings) for sev in ("helped_tutor", "hurt_tutor", "minor")},
            "review_summary": value.summary,
        }


@lru_cache(maxsize=64)
def _recorded_graph(graph_json: str) -> IUGraph | None:
    """The session's recorded IU graph (None when it has none or it does not read)."""
    try:
        return IUGraph.model_validate(json.loads(graph_json)) if graph_json else None
    except (ValueError, TypeError):
        return None


def _label(raw: Any) -> str:
    """The extractor's label as the rules read it (spec §1.5: anything else is well_explained)."""
    return raw if raw in ("shallow", "not_mentioned") else "well_explained"


JUDGES.register("interaction_quality", InteractionQuality())
JUDGES.register("termination", Termination())
JUDGES.register("simulator_review", SimulatorReviewJudge())

#: what a run and ``ray-knowsim score`` apply unless told otherwise
DEFAULT_JUDGES: tuple[str, ...] = ("interaction_quality", "termination")

__all__ = ["DEFAULT_JUDGES", "JUDGES", "InteractionQuality", "Judge", "SimulatorReviewJudge", "Termination"]
