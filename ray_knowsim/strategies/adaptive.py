"""Built-in tutor strategy ``adaptive``."""

from ray_knowsim.strategies.base import strategy


@strategy
class ADAPTIVE:
    """The adaptive tutor (spec §12.7): template ``assistant_adaptive``."""

    name = "adaptive"
    template = "assistant_adaptive"
    offline_reply = "ray_knowsim.llm.offline.assistant:teach_adaptive"
    reply_tokens = 450.0  # a typical chat model's completion tokens per reply (the planner's prior)
    offline_reply_words = 75.0  # the offline test double's, measured on the demo items
