"""What a run will do, derived from its config before any work starts: the sessions and their
shards (:mod:`.sessions`), and the inputs, run directory, shard context, model prices and placement
of self-hosted models (:mod:`.build`). Nothing here runs a shard or starts a model.

``build`` sits here rather than in ``run/``: the checks before spending (``ray_knowsim.preflight``)
and the scoring stage need what it derives (the shard context, the prices, ``RunError``), and the
run's fan-out needs those checks, so ``build`` sits below both. ``plan_only`` (``run --plan``),
which starts Ray, is in ``ray_knowsim.run.fan_out``.
"""
