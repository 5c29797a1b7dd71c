"""An outside metric, registered the way docs/extending.md ("Adding a metric") says: a module a
run config names in ``plugins``, imported by the driver and by every worker before a session runs."""

from __future__ import annotations

from ray_knowsim.rules.trajectory import Trajectory
from ray_knowsim.schema.metrics import Metric, register_metric

#: the column; tests/schema/test_outside_metric.py reads it back from a run
NAME = "mastery_share"


def mastery_share(trajectory: Trajectory) -> float | None:
    """The share of the session's IUs the learner knows well at the end (None: no IUs)."""
    final = trajectory.final
    if not final:
        return None
    return sum(1 for s in final.values() if s == 3) / len(final)


register_metric(
    Metric(NAME, "MS", "mastery share: the share of IUs known well at the end of the conversation", source="outside",
           early_stop=False, phrase="brings more IUs to mastery", compute=mastery_share),
    replace=True,  # a test process may import it twice (by name and by path)
)
