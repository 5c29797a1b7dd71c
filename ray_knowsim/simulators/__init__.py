"""Learner simulators: the structured KnowSim learner and the baselines, one module each, with
their registry (:mod:`ray_knowsim.simulators.base`). This is the public place plugins import from."""

from ray_knowsim.simulators.base import (
    SIMULATORS,
    LearnerView,
    Simulator,
    baseline_methods,
    baseline_prompt,
    get_simulator,
    register_simulator,
    render_as_baseline,
    render_baseline_user,
    simulator,
)

__all__ = [
    "SIMULATORS", "LearnerView", "Simulator", "baseline_methods", "baseline_prompt",
    "get_simulator", "register_simulator", "render_as_baseline", "render_baseline_user", "simulator",
]  # fmt: skip
