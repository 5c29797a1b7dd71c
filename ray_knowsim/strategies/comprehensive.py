"""Built-in tutor strategy ``comprehensive``."""

from ray_knowsim.strategies.base import strategy


@strategy
class COMPREHENSIVE:
    """The comprehensive tutor (spec §12.7): template ``assistant_comprehensive``."""

    name = "comprehensive"
    template = "assistant_comprehensive"
    offline_reply = "ray_knowsim.llm.offline.assistant:teach_comprehensive"
    reply_tokens = 900.0  # a typical chat model's completion tokens per reply (the planner's prior)
    offline_reply_words = 210.0  # the offline test double's, measured on the demo items
