"""The public entry points of a run, importable from one place.

A run is three layers, each its own module (read top-down):

* **batch** — :mod:`ray_knowsim.engine.batch`: ``run`` — Ray fan-out of shard tasks, resume,
  manifest, scoring stage, tables;
* **build** — :mod:`ray_knowsim.engine.build`: ``prepare``, ``make_context``, placement —
  everything derived from the config before work starts;
* **execute** — :mod:`ray_knowsim.engine.worker`: one shard inside a Ray worker (initial states,
  the simulation loop, streamed commits).

This module only re-exports them, so ``from ray_knowsim.engine.runner import run`` keeps working.
"""

from __future__ import annotations

from ray_knowsim.engine.batch import RunOutcome, pending_work, ray_options, ray_session, run, write_run_tables
from ray_knowsim.engine.build import (
    PlacementFailed,
    RunError,
    make_context,
    model_prices,
    place_models,
    plan_only,
    prepare,
)

__all__ = [
    "PlacementFailed",
    "RunError",
    "RunOutcome",
    "make_context",
    "model_prices",
    "pending_work",
    "place_models",
    "plan_only",
    "prepare",
    "ray_options",
    "ray_session",
    "run",
    "write_run_tables",
]
