"""Synthetic learner profiles for the ZS-CoT-Prof baseline (spec §12.7), drawn from the session seed.

The paper generates a level-matched profile per session with a model. We draw it deterministically:
for each behavioural attribute, one of a few descriptions written for the knowledge level, picked
by a ``random.Random`` seeded from the session seed. Same session, same profile, on every resume
and every backend; no extra model call; and the profile is recorded with the session
(``user_profile`` column) so a reader sees exactly what the baseline was told.
"""

from __future__ import annotations

import hashlib
import random

#: attribute -> level -> options (each a clause completing "The student ...")
ATTRIBUTES: dict[str, dict[str, tuple[str, ...]]] = {
    "communication": {
        "novice": (
            "writes short, informal messages and describes things in everyday words rather than technical terms",
            "often says only what confuses them, without saying what they tried",
            "asks broad questions like 'where do I even start?'",
        ),
        "intermediate": (
            "writes clear messages and uses some technical terms, not always precisely",
            "explains what they tried before asking, in a sentence or two",
            "asks about the specific step that trips them up",
        ),
        "advanced": (
            "writes precise, compact messages with correct terminology",
            "states their own reasoning first and asks the tutor to check a particular point",
            "asks pointed questions about subtle points or edge cases",
        ),
    },
    "confidence": {
        "novice": ("is unsure of themselves and apologises for 'basic' questions", "doubts even the steps they get right"),
        "intermediate": ("is fairly confident on familiar ground but hedges on new material", "is confident until a step goes wrong"),
        "advanced": ("is confident and will push back when something seems off", "is self-assured but open to correction"),
    },
    "persistence": {
        "novice": ("gives up on a step quickly and waits for the tutor to lead", "keeps trying but soon feels overwhelmed by long explanations"),
        "intermediate": ("tries a step two or three times before asking for help", "keeps going as long as each step makes sense"),
        "advanced": ("works through difficulties independently and only asks when truly stuck", "persists and likes to finish the reasoning themselves"),
    },
    "pace": {
        "novice": ("needs one idea at a time and concrete examples", "prefers small steps and repetition"),
        "intermediate": ("can take a couple of ideas at once if they are connected", "likes a brief explanation followed by a chance to try"),
        "advanced": ("moves fast and finds long explanations of basics tedious", "wants only what is new to them"),
    },
}


def level_profile(knowledge_level: str, seed: int) -> str:
    """A profile for ``knowledge_level`` (novice / intermediate / advanced), fixed by ``seed``."""
    level = knowledge_level if knowledge_level in ATTRIBUTES["communication"] else "intermediate"
    digest = hashlib.sha256(f"profile:{seed}:{level}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    parts = [f"{'An' if level[0] in 'aeiou' else 'A'} {level} student who"]
    clauses = [rng.choice(options[level]) for options in ATTRIBUTES.values()]
    parts.append("; ".join(clauses[:-1]) + f"; and {clauses[-1]}.")
    return " ".join(parts)


__all__ = ["ATTRIBUTES", "level_profile"]
