"""A simulator registered from outside the package: a stateless learner under its own name that
reuses the package's ZS-CoT template, registered with the decorator as docs/extending.md shows."""

from __future__ import annotations

from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators import LearnerView, render_as_baseline, simulator

PROMPT = BaselinePrompt(template="baseline_zero_shot_cot", thinks=True)


@simulator("plain-cot", prompt=PROMPT, replace=True)
def PLAIN_COT(view: LearnerView):
    """A ZS-CoT learner under another name."""
    return render_as_baseline(view, "plain-cot", PROMPT)
