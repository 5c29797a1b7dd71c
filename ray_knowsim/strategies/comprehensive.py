"""The comprehensive tutor (spec §12.7): template ``assistant_comprehensive``."""

from ray_knowsim.strategies import TutorStrategy, register_strategy

STRATEGY = register_strategy(
    TutorStrategy(
        name="comprehensive",
        template="assistant_comprehensive",
        offline_reply="ray_knowsim.llm.offline.assistant:teach_comprehensive",
        description=(__doc__ or "").splitlines()[0],
    )
)
