"""Adaptive runs: decide with fewer conversations (docs/adaptive.md).

A layer above the run machinery: :mod:`.schedule` fixes the item order and what each round adds,
:mod:`.observe` turns committed session rows into the paired win counts, :mod:`.driver` runs the
rounds through the normal run path (``engine.runner.run`` with a session subset) and writes
``RUN_DIR/decisions.json``. The statistics are :mod:`ray_knowsim.stats.adaptive`.
"""
