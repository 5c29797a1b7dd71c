"""What every model backend shares, and nothing backend-specific: the one model interface
(:mod:`.protocol`: a chat request in, a response out), reading and repairing answers
(:mod:`.parse`), the response cache (:mod:`.cache`), per-role accounting (:mod:`.accounting`),
retry timing (:mod:`.retry`), the limiter protocol (:mod:`.limiter`), reasoning text
(:mod:`.thinking`) and a recording wrapper for tests and audits (:mod:`.recording`). The
OpenAI-compatible client (:mod:`.http`) and the deterministic offline model (:mod:`.offline`, the
test double) sit here too; the backends that make models from a config are ``ray_knowsim.backends``.
No Ray is imported here."""
