"""Fixed vocabulary of the KnowChat human study: arms, condition codes, levels, metrics.

Kept apart from the loader so the statistics, the sim mapping and the tests share one source of
truth. The level cut points are a config (``LevelCuts``) because the study's own cut points are
not published with the data; the defaults are documented below and overridable from the CLI.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, model_validator

ARMS: tuple[str, ...] = ("strategy", "model")
TASKS: tuple[str, ...] = ("math", "expertqa")
LEVELS: tuple[str, ...] = ("novice", "intermediate", "advanced")

#: the release's integer condition code -> condition label, per arm
CONDITION_CODES: dict[str, dict[int, str]] = {
    "strategy": {0: "Socratic", 1: "Adaptive", 2: "Comprehensive"},
    "model": {0: "GPT-5.4", 1: "Gemini 3 Pro", 2: "Claude Opus 4.7"},
}

#: human metrics in table order; KG exists for math only (pre/post tests)
METRICS: tuple[str, ...] = ("KG", "DC", "CO", "IQ")
#: +1: higher is better, -1: lower is better (Cognitive Overload)
METRIC_DIRECTION: dict[str, int] = {"KG": 1, "DC": 1, "CO": -1, "IQ": 1}
#: tasks on which each metric is measured for humans
METRIC_TASKS: dict[str, tuple[str, ...]] = {"KG": ("math",), "DC": TASKS, "CO": TASKS, "IQ": TASKS}
#: default sim session column per human metric (``--metric-map`` overrides)
DEFAULT_SIM_COLUMNS: dict[str, str] = {"KG": "kg", "DC": "dc", "CO": "co", "IQ": "iq"}


def norm_token(text: str) -> str:
    """Lower-case alphanumerics only: 'Claude Opus 4.7' and 'claude-opus-4-7' both -> 'claudeopus47'."""
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def condition_label(arm: str, code: object) -> str:
    """Label for a release condition code (int, integral float, digit string) or label text.

    Raises ValueError (the caller adds file/sheet/row) for anything not in the arm's map.
    """
    codes = CONDITION_CODES[arm]
    if isinstance(code, bool):
        raise ValueError(f"unknown {arm}-arm condition code {code!r} (expected one of {sorted(codes)})")
    if isinstance(code, float) and code.is_integer():
        code = int(code)
    if isinstance(code, str) and code.strip().lstrip("-").isdigit():
        code = int(code.strip())
    if isinstance(code, int):
        if code in codes:
            return codes[code]
    elif isinstance(code, str):
        by_norm = {norm_token(v): v for v in codes.values()}
        if norm_token(code) in by_norm:
            return by_norm[norm_token(code)]
    raise ValueError(
        f"unknown {arm}-arm condition code {code!r} (expected one of "
        + ", ".join(f"{k} ({v})" for k, v in codes.items())
        + ")"
    )


def condition_order(arm: str, label: str) -> int:
    """Code of a label: pairs are always formed (lower code, higher code)."""
    for k, v in CONDITION_CODES[arm].items():
        if v == label:
            return k
    raise KeyError(label)


class LevelCuts(BaseModel):
    """Prescreening fraction correct (score / max score) -> knowledge level.

    ``fraction < novice_below`` -> novice; ``fraction >= advanced_from`` -> advanced; otherwise
    intermediate. Defaults 0.4 / 0.7: thirds would put a 3/10 scorer with a 4/10 one; these put
    "under 40 %" and "70 % or more" at the ends, the usual reading of a short placement test.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    novice_below: float = 0.4
    advanced_from: float = 0.7

    @model_validator(mode="after")
    def _ordered(self) -> "LevelCuts":
        if not (0.0 <= self.novice_below <= self.advanced_from <= 1.0):
            raise ValueError(
                f"level cuts must satisfy 0 <= novice_below <= advanced_from <= 1, got "
                f"{self.novice_below}, {self.advanced_from}"
            )
        return self

    def level(self, fraction: float) -> str:
        if fraction < self.novice_below:
            return "novice"
        if fraction >= self.advanced_from:
            return "advanced"
        return "intermediate"

    @classmethod
    def parse(cls, text: str) -> "LevelCuts":
        """'0.4,0.7' -> LevelCuts(novice_below=0.4, advanced_from=0.7)."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 2:
            raise ValueError(f"level cuts must be two numbers 'NOVICE_BELOW,ADVANCED_FROM', got {text!r}")
        return cls(novice_below=float(parts[0]), advanced_from=float(parts[1]))


def math_kg(pre: float, post: float, max_score: float) -> float | None:
    """Normalised learning gain (post - pre) / (max - pre); None at the ceiling (pre == max)."""
    room = max_score - pre
    if room <= 0 or math.isclose(room, 0.0):
        return None
    return (post - pre) / room
