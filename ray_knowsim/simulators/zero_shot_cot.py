"""Baseline ZS-CoT: thinks through its understanding before each message (spec §12.7)."""

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators.base import LearnerView, render_as_baseline, simulator

PROMPT = BaselinePrompt(template="baseline_zero_shot_cot", thinks=True)


@simulator("zero-shot-cot", prompt=PROMPT, description=__doc__ or "")
def ZERO_SHOT_COT(view: LearnerView) -> ChatRequest:
    return render_as_baseline(view, "zero-shot-cot", PROMPT)
