"""Learner simulators, by name (built-ins: one module each in :mod:`ray_knowsim.simulators`): the
structured KnowSim learner and the baselines.

A simulator is a :class:`Simulator` registered in :data:`SIMULATORS`. ``structured`` says whether
the session keeps a knowledge state (signal extraction and the update rules every turn, spec §6)
or is a stateless baseline; ``render`` builds the learner's request for one turn from a
:class:`LearnerView`; ``make_profile`` (optional) draws the session's learner profile at start.
Run configs name simulators (``conditions: [{simulator: zero-shot-cot}]``); nothing else branches
on the names. See ``docs/extending.md`` ("Adding a simulator").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ray_knowsim.model.chat import ChatRequest
from ray_knowsim.model.graph import GraphIndex, IUGraph
from ray_knowsim.model.items import Item
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.registry import Registry


@dataclass(frozen=True)
class LearnerView:
    """What a simulator may read when writing the learner's next message."""

    item: Item
    graph: IUGraph
    index: GraphIndex
    states: Mapping[str, int]  # current state by IU id (after the last turn; the initial one at turn 1)
    initial: Mapping[str, int]  # the session's initial state by IU id
    transcript: Sequence[Sequence[str]]
    knowledge_level: str
    explained: Sequence[str] = ()  # labels ever rated well_explained
    stop_hint: bool = False
    profile: str = ""  # the session's learner profile ("" when the simulator has none)
    prompts: str = DEFAULT_PROMPTS  # prompt set
    connectable: str = "reference"  # definition of connectable unknowns (spec §12.7)
    seed: int | None = None
    request_id: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Simulator:
    name: str
    structured: bool  # keeps a knowledge state (extractor + update rules) rather than a bare baseline
    render: Callable[[LearnerView], ChatRequest]
    #: ``make_profile(knowledge_level, session_seed) -> str``: the session's learner profile,
    #: drawn once at session start and recorded in the session row (``user_profile``)
    make_profile: Callable[[str, int], str] | None = None
    #: for baselines: what their template is given (:class:`ray_knowsim.prompts.baselines.BaselinePrompt`)
    prompt: Any = None
    description: str = ""


SIMULATORS: Registry[Simulator] = Registry(
    "simulator",
    builtins=(
        "ray_knowsim.simulators.structured",
        "ray_knowsim.simulators.zero_shot",
        "ray_knowsim.simulators.zero_shot_cot",
        "ray_knowsim.simulators.zero_shot_cot_profile",
    ),
)


def register_simulator(sim: Simulator, *, replace: bool = False) -> Simulator:
    SIMULATORS.register(sim.name, sim, replace=replace)
    return sim


def get_simulator(name: str) -> Simulator:
    return SIMULATORS.get(name)


def baseline_simulator(name: str, prompt: Any, make_profile: Callable[[str, int], str] | None = None, description: str = "") -> Simulator:
    """A stateless baseline that renders ``prompt`` (a BaselinePrompt) each turn."""
    from ray_knowsim.prompts.baselines import render_baseline

    def render(view: LearnerView) -> ChatRequest:
        return render_baseline(
            view.item, prompt, view.transcript, method=name, profile=view.profile, graph=view.graph,
            initial_states=[view.initial[v] for v in view.index.ids], knowledge_level=view.knowledge_level,
            allow_terminate=True, index=view.index, seed=view.seed, request_id=view.request_id, prompts=view.prompts,
        )  # fmt: skip

    return Simulator(name=name, structured=False, render=render, make_profile=make_profile, prompt=prompt, description=description)


__all__ = ["SIMULATORS", "LearnerView", "Simulator", "baseline_simulator", "get_simulator", "register_simulator"]
