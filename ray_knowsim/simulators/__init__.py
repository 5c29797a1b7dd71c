"""The built-in learner simulators, one module each, registered in
:data:`ray_knowsim.prompts.learners.SIMULATORS` (the registry and its types live in the prompts
layer, so renderers can resolve a name without importing this package). Re-exported here as the
public place plugins import from."""

from ray_knowsim.prompts.learners import (
    SIMULATORS,
    LearnerView,
    Simulator,
    baseline_simulator,
    get_simulator,
    register_simulator,
)

__all__ = ["SIMULATORS", "LearnerView", "Simulator", "baseline_simulator", "get_simulator", "register_simulator"]
