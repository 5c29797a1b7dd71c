"""The Simple tutor of the model arm and the benchmark (spec §12.7); ``minimal`` is its v1 name."""

from ray_knowsim.strategies import TutorStrategy, register_strategy

STRATEGY = register_strategy(
    TutorStrategy(
        name="simple",
        template="assistant_simple",
        legacy_templates=("assistant_minimal",),
        offline_reply="ray_knowsim.llm.offline.assistant:teach_simple",
        aliases=("minimal",),
        description=(__doc__ or "").splitlines()[0],
    )
)
