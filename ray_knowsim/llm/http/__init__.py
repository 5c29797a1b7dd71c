"""The model client for OpenAI-compatible ``/v1/chat/completions`` endpoints, one job a module:
the endpoint's config (:mod:`.config`), keeping API keys out of sight (:mod:`.credentials`), the
X-KnowSim-* names shared with our own server (:mod:`.wire`), the client with its request building
and transport retries (:mod:`.client`) and the reading of its answers (:mod:`.response`).
"""
