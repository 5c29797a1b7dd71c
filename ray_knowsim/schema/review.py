"""The LLM review of the simulator: its taxonomy of learner and extractor errors and its output.

Why a module: the review judge (score/judges.py), its prompt, its parser, the offline double and
the agreement with the deterministic audit (score/review.py) all speak this vocabulary. Kinds
shared with the audit (ray_knowsim.audit.checks.FLAG_KINDS) carry the audit's names, so the two
can be compared kind by kind; the rest are errors only a reader of meaning can see.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ray_knowsim.schema.outputs import StructuredOutput

#: kind -> (party, what the simulator did wrong); the first six are the audit's kinds too
REVIEW_KINDS: dict[str, tuple[str, str]] = {
    "learner_claims_unaware": ("learner", "says it understands an idea its state holds unaware"),
    "learner_uses_unaware": ("learner", "works with an idea its state holds unaware, with no sign of confusion"),
    "learner_reveals_answer": ("learner", "gives away the answer or reasoning it should not have yet"),
    "learner_stop_contradicts_state": ("learner", "ends (done, or overwhelmed) against what its state says"),
    "extractor_unsupported_label": ("extractor", "credits the reply with explaining an idea it does not explain"),
    "extractor_ignores_covered": ("extractor", "marks as not mentioned an idea the reply covers"),
    "extractor_constant_labels": ("extractor", "gives the same labels whatever the replies say"),
    "learner_hides_knowledge": ("learner", "acts as if it does not know an idea its state holds known"),
    "learner_incoherent": ("learner", "writes a message that does not follow from the conversation"),
    "extractor_wrong_depth": ("extractor", "calls a shallow treatment well explained, or the reverse"),
    "extractor_wrong_attempt": ("extractor", "misreads whether the learner reasoned, restated or did neither"),
}
ReviewKind = Literal[
    "learner_claims_unaware", "learner_uses_unaware", "learner_reveals_answer", "learner_stop_contradicts_state",
    "extractor_unsupported_label", "extractor_ignores_covered", "extractor_constant_labels",
    "learner_hides_knowledge", "learner_incoherent", "extractor_wrong_depth", "extractor_wrong_attempt",
]  # fmt: skip
#: what an error did to the tutor's measured result
SEVERITIES: dict[str, str] = {
    "helped_tutor": "made the tutor look better than its replies earned (e.g. credited teaching it did not do)",
    "hurt_tutor": "made the tutor look worse than its replies earned (e.g. ignored teaching it did)",
    "minor": "an error with little effect on the tutor's measured result",
}
Severity = Literal["helped_tutor", "hurt_tutor", "minor"]


class ReviewFinding(StructuredOutput):
    """One simulator error, with the words of the transcript that show it."""

    turn: int = Field(ge=1, description="the exchange it happened in, counted from 1")
    party: Literal["learner", "extractor"]
    kind: ReviewKind
    iu: str | None = Field(None, description="the idea's id (e.g. IU3), when the error concerns one")
    severity: Severity
    evidence: str = Field(min_length=1, description="words quoted exactly from that turn's learner message or tutor reply")
    explanation: str = ""


class SimulatorReview(StructuredOutput):
    """The review of one session: every error found (none is an answer too) and a summary."""

    findings: list[ReviewFinding]
    summary: str = ""


__all__ = ["REVIEW_KINDS", "SEVERITIES", "ReviewFinding", "ReviewKind", "Severity", "SimulatorReview"]
