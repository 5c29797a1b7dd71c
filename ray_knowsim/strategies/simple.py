"""Built-in tutor strategy ``simple``."""

from ray_knowsim.strategies.base import strategy


@strategy
class SIMPLE:
    """The Simple tutor of the model arm and the benchmark (spec §12.7); ``minimal`` is its v1 name."""

    name = "simple"
    template = "assistant_simple"
    legacy_templates = ("assistant_minimal",)
    offline_reply = "ray_knowsim.llm.offline.assistant:teach_simple"
    aliases = ("minimal",)
    reply_tokens = 120.0  # a typical chat model's completion tokens per reply (the planner's prior)
    offline_reply_words = 26.0  # the offline test double's, measured on the demo items
