"""The requests of one turn of a session, built in one place.

The simulation loop (:mod:`ray_knowsim.sim.loop`) sends them and ``run --dry-run``
(:mod:`ray_knowsim.preflight.estimate`) counts their tokens, so what the estimate counts is what a run
sends: the same renderers, fed from the same session facts, with the same history. A turn is the
learner's message (from the transcript so far), the tutor's reply (the transcript ending with that
message) and, for a structured learner, the extractor's reading of the exchange (the transcript
ending with the reply). Sampling seeds and request ids are derived from the session's seed and
the turn number (:func:`ray_knowsim.sim.types.request_seed`); the role's temperature and token
budget are the run's, applied by the loop (:meth:`RoleSettings.apply`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.render import render_assistant, render_extractor
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.sim.session import LiveSession
from ray_knowsim.sim.types import ShardContext, request_id, request_seed

Transcript = Sequence[Sequence[str]]  # [speaker, text] pairs


@dataclass(frozen=True)
class TurnRequests:
    """Builds a session's requests for turn ``turn`` under the run's prompt set."""

    prompts: str = DEFAULT_PROMPTS
    connectable: str = "reference"

    @classmethod
    def of(cls, ctx: ShardContext) -> "TurnRequests":
        return cls(prompts=ctx.prompts, connectable=ctx.connectable)

    def learner(self, live: LiveSession, transcript: Transcript, turn: int) -> ChatRequest:
        """The learner's next message after ``transcript``, by the session's own simulator."""
        view = live.learner_view(transcript, prompts=self.prompts, connectable=self.connectable,
                                 seed=self._seed(live, "user_sim", turn), request_id=self._id(live, "user_sim", turn))
        return live.simulator.render(view)

    def assistant(self, live: LiveSession, transcript: Transcript, turn: int) -> ChatRequest:
        """The tutor's reply to ``transcript``, which ends with the learner's message."""
        return render_assistant(live.item, live.strategy, transcript, prompts=self.prompts,
                                seed=self._seed(live, "assistant", turn), request_id=self._id(live, "assistant", turn))

    def extractor(self, live: LiveSession, transcript: Transcript, turn: int) -> ChatRequest:
        """The signal report of the last exchange of ``transcript`` (learner message, tutor reply),
        read against the session's knowledge state before the turn."""
        (_, user), (_, reply) = transcript[-2], transcript[-1]
        return render_extractor(live.item, live.graph, live.knowledge.states, transcript[:-2], user, reply, index=live.index,
                                prompts=self.prompts, seed=self._seed(live, "extractor", turn),
                                request_id=self._id(live, "extractor", turn))

    @staticmethod
    def _seed(live: LiveSession, role: str, turn: int) -> int:
        return request_seed(live.spec.seed, role, turn)

    @staticmethod
    def _id(live: LiveSession, role: str, turn: int) -> str:
        return request_id(live.spec.session_id, role, turn)


__all__ = ["Transcript", "TurnRequests"]
