"""Baseline ZS-CoT: thinks through its understanding before each message (spec §12.7)."""

from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators import baseline_simulator, register_simulator

SIMULATOR = register_simulator(
    baseline_simulator("zero-shot-cot", BaselinePrompt(template="baseline_zero_shot_cot", thinks=True), description=__doc__ or "")
)
