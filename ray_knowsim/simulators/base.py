"""What a learner simulator is, and the registry that names them.

A simulator is a :class:`Simulator` in :data:`SIMULATORS`. ``structured`` says whether the session
keeps a knowledge state (signal extraction and the update rules every turn, spec §6) or is a
stateless baseline; ``render`` builds the learner's request for one turn from a
:class:`LearnerView`; ``make_profile`` (optional) draws the session's learner profile at start.
Run configs name simulators (``conditions: [{simulator: zero-shot-cot}]``); nothing else branches
on the names.

Every public module of this package is a built-in and registers itself with :func:`simulator`
when the registry is first asked for a name: a new built-in is one new module, with nothing else
to keep in step. Plugins register the same way from their own modules (``docs/extending.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ray_knowsim.prompts.baselines import BaselinePrompt, render_baseline
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS
from ray_knowsim.prompts.views import Transcript
from ray_knowsim.registry import Registry, first_line
from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.schema.graph import GraphIndex, IUGraph
from ray_knowsim.schema.items import Item


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
    prompt: BaselinePrompt | None = None
    description: str = ""


SIMULATORS: Registry[Simulator] = Registry("simulator", package="ray_knowsim.simulators")


def register_simulator(sim: Simulator, *, replace: bool = False) -> Simulator:
    """Register a :class:`Simulator` built by hand (the decorator :func:`simulator` builds one for you)."""
    SIMULATORS.register(sim.name, sim, replace=replace)
    return sim


def simulator(
    name: str,
    *,
    structured: bool = False,
    prompt: BaselinePrompt | None = None,
    make_profile: Callable[[str, int], str] | None = None,
    description: str = "",
    replace: bool = False,
) -> Callable[[Callable[[LearnerView], ChatRequest]], Simulator]:
    """Register the decorated render function as the simulator ``name``; its docstring's first
    line is the description unless one is given. The module then holds a :class:`Simulator`
    under the function's name."""

    def register(render: Callable[[LearnerView], ChatRequest]) -> Simulator:
        text = description or first_line(render.__doc__)
        sim = Simulator(name=name, structured=structured, render=render, make_profile=make_profile, prompt=prompt,
                        description=text)
        return register_simulator(sim, replace=replace)

    return register


def get_simulator(name: str) -> Simulator:
    return SIMULATORS.get(name)


def render_as_baseline(view: LearnerView, name: str, prompt: BaselinePrompt) -> ChatRequest:
    """A stateless baseline's request for this turn: ``prompt``'s template over the view."""
    return render_baseline(
        view.item, prompt, view.transcript, method=name, profile=view.profile, graph=view.graph,
        initial_states=[view.initial[v] for v in view.index.ids], knowledge_level=view.knowledge_level,
        allow_terminate=True, index=view.index, seed=view.seed, request_id=view.request_id, prompts=view.prompts,
    )  # fmt: skip


def baseline_methods() -> dict[str, str]:
    """{simulator name: template} of every registered baseline."""
    return {n: SIMULATORS.get(n).prompt.template for n in SIMULATORS.names() if SIMULATORS.get(n).prompt is not None}


def baseline_prompt(method: str) -> BaselinePrompt:
    """The :class:`BaselinePrompt` of the registered baseline ``method``."""
    spec = SIMULATORS.get(method).prompt if method in SIMULATORS else None
    if spec is None:
        raise ValueError(f"unknown baseline method {method!r}; choose one of {sorted(baseline_methods())}")
    return spec


def render_baseline_user(item: Item, method: str, transcript: Transcript = (), **options: Any) -> ChatRequest:
    """The baseline ``method``'s next learner message, by name (``options``: :func:`render_baseline`'s
    keywords; profile baselines need ``graph`` and ``initial_states``)."""
    return render_baseline(item, baseline_prompt(method), transcript, method=method, **options)


__all__ = [
    "SIMULATORS", "LearnerView", "Simulator", "baseline_methods", "baseline_prompt",
    "get_simulator", "register_simulator", "render_as_baseline", "render_baseline_user", "simulator",
]  # fmt: skip
