"""The example of docs/extending.md "Adding a metric" is code that works: imported as a plugin
module, it registers its metric, and the metric computes on a trajectory."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from ray_knowsim.schema.metrics import OUTSIDE_METRICS

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def test_the_docs_example_registers_a_working_metric(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("## Adding a metric", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "doc_metric_example.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("doc_metric_example")
        metric = OUTSIDE_METRICS.get("mastery_share")
        from tests.doubles.trajectories import small_trajectory

        traj, rules = small_trajectory()
        want = sum(s == 3 for s in traj.final.values()) / len(traj.final)
        assert metric.compute(traj) == want
        assert traj.summary(rules)["mastery_share"] == want
    finally:
        OUTSIDE_METRICS._items.pop("mastery_share", None)
        sys.modules.pop("doc_metric_example", None)
