"""The adaptive tutor (spec §12.7): template ``assistant_adaptive``."""

from ray_knowsim.strategies import TutorStrategy, register_strategy

STRATEGY = register_strategy(
    TutorStrategy(
        name="adaptive",
        template="assistant_adaptive",
        offline_reply="ray_knowsim.llm.offline.assistant:teach_adaptive",
        description=(__doc__ or "").splitlines()[0],
    )
)
