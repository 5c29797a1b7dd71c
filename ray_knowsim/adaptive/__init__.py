"""Adaptive runs: decide with fewer conversations (docs/adaptive.md).

A layer above the run machinery: :mod:`.schedule` fixes the item order and what each round adds,
:mod:`.observe` turns session rows into the per-pair win/loss/tie counts, :mod:`.rounds` runs the
rounds (shared by the runner and the planning replay), :mod:`.driver` gets each round's sessions
by running them through the normal run path (``run.fan_out.run`` with a session subset) and
writes ``RUN_DIR/decisions.json``; :func:`replay` gets them from rows already there. The
statistics are :mod:`ray_knowsim.stats.adaptive`.
"""

from __future__ import annotations


def replay(rows, spec=None, **kwargs):
    """:func:`ray_knowsim.adaptive.planning.replay` (imported on first use: no Ray at import)."""
    from ray_knowsim.adaptive.planning import replay as _replay

    return _replay(rows, spec, **kwargs)


__all__ = ["replay"]
