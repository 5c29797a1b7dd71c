"""What a session spent and how its answers came: tokens per role, model calls, cache hits,
truncations, the prompt versions asked, and the extractor's drift (repairs, refusals); the
session row's accounting columns are read from it (:func:`ray_knowsim.sim.rows.session_row`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ray_knowsim.schema.chat import Usage
from ray_knowsim.sim.ask import Answer


@dataclass
class SessionLedger:
    usage: dict[str, Usage] = field(default_factory=dict)  # role -> tokens, in the order roles were first asked
    calls: int = 0  # answers from a model
    cache_hits: int = 0
    truncations: int = 0
    truncations_by_role: dict[str, int] = field(default_factory=dict)  # role -> answers cut by max_tokens
    extractor_repairs: int = 0
    extractor_refusals: int = 0
    prompt_versions: dict[str, str] = field(default_factory=dict)

    def charge(self, role: str, answer: Answer[Any]) -> None:
        """Book ``role``'s answer (after its repairs and truncation bump), whether or not it has a value."""
        self.usage.setdefault(role, Usage()).add(answer.usage)
        self.calls += answer.calls
        self.cache_hits += answer.cache_hits
        self.truncations += answer.truncations
        if answer.truncations:
            self.truncations_by_role[role] = self.truncations_by_role.get(role, 0) + answer.truncations
        if answer.prompt_version:
            name, _, version = answer.prompt_version.partition("@")
            self.prompt_versions[name] = version or answer.prompt_version
        if role == "extractor":  # see sim/ask.py: what the parser normalised, what it refused
            self.extractor_refusals += len(answer.refusals)
            self.extractor_repairs += len(answer.repairs)


__all__ = ["SessionLedger"]
