"""A simulator registered from outside the package: a stateless learner that always asks the same."""

from __future__ import annotations

from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators import baseline_simulator, register_simulator

# a baseline that reuses the package's ZS-CoT template under another name
SIMULATOR = register_simulator(
    baseline_simulator("plain-cot", BaselinePrompt(template="baseline_zero_shot_cot", thinks=True)), replace=True
)
