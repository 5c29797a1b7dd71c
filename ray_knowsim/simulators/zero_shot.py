"""Baseline ZS: a learner at a stated knowledge level, no state tracked (spec §12.7)."""

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators.base import LearnerView, render_as_baseline, simulator

PROMPT = BaselinePrompt(template="baseline_zero_shot", thinks=False)


@simulator("zero-shot", prompt=PROMPT, description=__doc__ or "")
def ZERO_SHOT(view: LearnerView) -> ChatRequest:
    return render_as_baseline(view, "zero-shot", PROMPT)
