"""The socratic tutor (spec §12.7): template ``assistant_socratic``."""

from ray_knowsim.strategies import TutorStrategy, register_strategy

STRATEGY = register_strategy(
    TutorStrategy(
        name="socratic",
        template="assistant_socratic",
        offline_reply="ray_knowsim.llm.offline.assistant:teach_socratic",
        description=(__doc__ or "").splitlines()[0],
    )
)
