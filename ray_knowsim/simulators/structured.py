"""The structured KnowSim learner (spec §5, §12.3, §12.7): prompted from its knowledge state."""

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.render import render_user_sim
from ray_knowsim.simulators.base import LearnerView, simulator


@simulator("structured", structured=True, description=__doc__ or "")
def STRUCTURED(view: LearnerView) -> ChatRequest:
    return render_user_sim(
        view.item, view.graph, view.states, view.transcript, explained=sorted(view.explained),
        stop_hint=view.stop_hint, index=view.index, seed=view.seed, request_id=view.request_id,
        prompts=view.prompts, connectable=view.connectable,
    )  # fmt: skip
