"""Built-in tutor strategy ``socratic``."""

from ray_knowsim.strategies.base import strategy


@strategy
class SOCRATIC:
    """The socratic tutor (spec §12.7): template ``assistant_socratic``."""

    name = "socratic"
    template = "assistant_socratic"
    offline_reply = "ray_knowsim.llm.offline.assistant:teach_socratic"
    reply_tokens = 300.0  # a typical chat model's completion tokens per reply (the planner's prior)
    offline_reply_words = 55.0  # the offline test double's, measured on the demo items
