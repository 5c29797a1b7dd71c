"""Built-in tutor strategy ``adaptive``."""

from ray_knowsim.strategies.base import strategy


@strategy
class ADAPTIVE:
    """The adaptive tutor (spec §12.7): template ``assistant_adaptive``."""

    name = "adaptive"
    template = "assistant_adaptive"
    offline_reply = "ray_knowsim.llm.offline.assistant:teach_adaptive"
