"""Baseline ZS-CoT-Prof: ZS-CoT plus a level-matched learner profile and the starting knowledge (spec §12.7).

The profile is drawn deterministically from the session seed (:func:`level_profile`), not asked of
a model: it is reproducible and resumable, costs no call, and is recorded in the session row.
"""

from ray_knowsim.schema.chat import ChatRequest
from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.registry import first_line
from ray_knowsim.simulators.base import LearnerView, render_as_baseline, simulator
from ray_knowsim.simulators.profiles import level_profile

PROMPT = BaselinePrompt(template="baseline_cot_profile", thinks=True, with_profile=True)


@simulator("zero-shot-cot-user-profile", prompt=PROMPT, make_profile=level_profile, description=first_line(__doc__))
def ZERO_SHOT_COT_PROFILE(view: LearnerView) -> ChatRequest:
    return render_as_baseline(view, "zero-shot-cot-user-profile", PROMPT)
