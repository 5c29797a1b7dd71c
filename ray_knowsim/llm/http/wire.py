"""Names on the wire shared by the HTTP client and our own server (:mod:`ray_knowsim.llm.offline.server`):
the X-KnowSim-* headers and the request-body field that carries the offline facts."""

from __future__ import annotations

# Headers that tell our own server (serve-offline) which KnowSim role asks; harmless elsewhere.
ROLE_HEADER = "X-KnowSim-Role"
PROMPT_VERSION_HEADER = "X-KnowSim-Prompt-Version"
SCHEMA_NAME_HEADER = "X-KnowSim-Schema-Name"
# ``<session>#<turn>:<role>``: lets a server (or a proxy in front of it) tell conversations apart
REQUEST_ID_HEADER = "X-KnowSim-Request-Id"
#: the request-body extension that carries the offline facts to our own offline server only
OFFLINE_FACTS_FIELD = "knowsim_offline_facts"
#: the field of a models-list entry by which ``serve-offline`` says that its model is the offline
#: test double and answers from those facts; ``ray-knowsim run`` then sends them to that entry
#: (backends/http/offline_double.py). No other server sets it, so no real model is ever sent the facts.
OFFLINE_DOUBLE_FIELD = "knowsim_offline_double"

__all__ = ["OFFLINE_DOUBLE_FIELD", "OFFLINE_FACTS_FIELD", "PROMPT_VERSION_HEADER", "REQUEST_ID_HEADER", "ROLE_HEADER", "SCHEMA_NAME_HEADER"]
