"""Tutor strategies: the system prompts of the tutor under test, one module each, with their
registry (:mod:`ray_knowsim.strategies.base`). This is the public place plugins import from."""

from ray_knowsim.strategies.base import STRATEGIES, OfflineReply, TutorStrategy, get_strategy, register_strategy, strategy

__all__ = ["STRATEGIES", "OfflineReply", "TutorStrategy", "get_strategy", "register_strategy", "strategy"]
