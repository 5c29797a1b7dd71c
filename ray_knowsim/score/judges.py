"""The judges: each is one object registered under a name in ``JUDGES``.

A judge says which transcripts it reads (:meth:`Judge.applies`), the request it sends, how its
answer is parsed, and the score columns the parsed answer fills. Adding one is a module with a
:class:`Judge` subclass and ``JUDGES.register("name", MyJudge())`` (see ``docs/extending.md``).
Values a judge returns under names that are not columns of :class:`~ray_knowsim.score.store.ScoreRow`
are kept in its ``extra_json`` column.
"""

from __future__ import annotations

from typing import Any

from ray_knowsim.llm.parse import ParseResult, parse_rating, parse_termination
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.judges import render_rater, render_termination_judge
from ray_knowsim.registry import Registry
from ray_knowsim.score.transcripts import Transcript


class Judge:
    """Base class of a judge. ``slot`` separates the seeds and request ids of the judges of one
    session (the built-ins use 0 and 1, which is what the in-loop judges of earlier runs used)."""

    slot: int = 0

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


JUDGES.register("interaction_quality", InteractionQuality())
JUDGES.register("termination", Termination())

#: what a run and ``ray-knowsim score`` apply unless told otherwise
DEFAULT_JUDGES: tuple[str, ...] = ("interaction_quality", "termination")

__all__ = ["DEFAULT_JUDGES", "JUDGES", "InteractionQuality", "Judge", "Termination"]
