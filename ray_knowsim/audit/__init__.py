"""The simulator audit: where a run's learner or extractor contradicts the run's own state.

Pure logic (no Ray, no I/O) in :mod:`.wording` and :mod:`.checks`: :mod:`.wording` matches text against an IU's own wording,
:mod:`.checks` flags one session. Reading a run directory and writing its tables is
:mod:`ray_knowsim.audit.run`.
"""

from ray_knowsim.audit.checks import FLAG_KINDS, AuditFlag, SessionFacts, TurnFacts, audit_session

__all__ = ["FLAG_KINDS", "AuditFlag", "SessionFacts", "TurnFacts", "audit_session"]
