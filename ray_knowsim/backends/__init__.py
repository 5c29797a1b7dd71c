"""Model backends: what a ``models.<key>: {backend: NAME}`` entry is and how its model is made.

* :mod:`.registry` — the registry (``BACKENDS``, ``register_backend``, ``BackendProfile``);
* :mod:`.offline`, :mod:`.http`, :mod:`.vllm` — one folder per built-in backend, each registering
  itself: its entry class, its builder and its check before spending;
* :mod:`.probe` — what such a check reports (``Capacity``) and the probes' shared helpers;
* :mod:`.limiter` — the run-wide rate and concurrency limits of ``http`` endpoints;
* :mod:`.model_set` — the models a run builds from its config, shared by every shard.

Layering: this package sits BELOW the config (``ray_knowsim.config`` validates a run's ``models:``
against the registry here and imports the built-in entry classes), so nothing here imports the
config; a run config is named only in words (``model_set.RunConfig``). The entries therefore live
with their backends, not in ``config/model_entries.py``, and each probe lives with its backend,
not in the pre-flight checks (which sit above and call it through the registry). Building an
extractor model from a recorded run config needs the config and the run's Ray session, so it is
``ray_knowsim.run.extractor``, not ``run/extractor.py``.
"""
