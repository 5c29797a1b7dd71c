"""The built-in tutor strategies, one module each, registered in
:data:`ray_knowsim.prompts.tutors.STRATEGIES` (the registry and its types live in the prompts
layer, so renderers can resolve a name without importing this package). Re-exported here as the
public place plugins import from."""

from ray_knowsim.prompts.tutors import STRATEGIES, TutorStrategy, get_strategy, register_strategy

__all__ = ["STRATEGIES", "TutorStrategy", "get_strategy", "register_strategy"]
