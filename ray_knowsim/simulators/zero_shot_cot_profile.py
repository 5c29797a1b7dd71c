"""Baseline ZS-CoT-Prof: ZS-CoT plus a level-matched learner profile and the starting knowledge (spec §12.7).

The profile is drawn deterministically from the session seed (:func:`level_profile`), not asked of
a model: it is reproducible and resumable, costs no call, and is recorded in the session row.
"""

from ray_knowsim.prompts.baselines import BaselinePrompt
from ray_knowsim.simulators import baseline_simulator, register_simulator
from ray_knowsim.simulators.profiles import level_profile

SIMULATOR = register_simulator(
    baseline_simulator(
        "zero-shot-cot-user-profile",
        BaselinePrompt(template="baseline_cot_profile", thinks=True, with_profile=True),
        make_profile=level_profile,
        description=(__doc__ or "").splitlines()[0],
    )
)
