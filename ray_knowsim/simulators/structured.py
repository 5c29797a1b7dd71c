"""The structured KnowSim learner (spec §5, §12.3, §12.7): prompted from its knowledge state."""

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.prompts.render import render_user_sim
from ray_knowsim.simulators import LearnerView, Simulator, register_simulator


def render(view: LearnerView) -> ChatRequest:
    return render_user_sim(
        view.item, view.graph, view.states, view.transcript, explained=sorted(view.explained),
        stop_hint=view.stop_hint, index=view.index, seed=view.seed, request_id=view.request_id,
        prompts=view.prompts, connectable=view.connectable,
    )  # fmt: skip


SIMULATOR = register_simulator(Simulator(name="structured", structured=True, render=render, description=__doc__ or ""))
