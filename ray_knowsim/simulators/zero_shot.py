"""Baseline ZS: a learner at a stated knowledge level, no state tracked (spec §12.7)."""

from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators import baseline_simulator, register_simulator

SIMULATOR = register_simulator(
    baseline_simulator("zero-shot", BaselinePrompt(template="baseline_zero_shot", thinks=False), description=__doc__ or "")
)
