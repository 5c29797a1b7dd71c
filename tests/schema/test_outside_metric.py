"""Adding a metric from outside the package, following docs/extending.md ("Adding a metric"), end
to end: a plugin module the run config names is imported by the driver and the workers; every
structured session of a real run on the offline backend gets the metric's column in its row and
in the Parquet files; the report's metric table shows it; compare tests it (a paired row with its
sentence); the sweep, which re-scores through the numba kernel, refuses it by name."""

from __future__ import annotations

import sys

import pyarrow.parquet as pq
import pytest

from ray_knowsim.schema.metrics import OUTSIDE_METRICS, MetricError, outside_metrics
from tests.doubles.run_config import small_config

PLUGIN = "tests.plugins.mastery_metric"
NAME = "mastery_share"


@pytest.fixture
def plugin_metric():
    """The plugin's metric registered for one test, and gone afterwards (the registry is the
    process's: no other test may see a column it did not ask for)."""
    import importlib

    importlib.import_module(PLUGIN)
    yield OUTSIDE_METRICS.get(NAME)
    OUTSIDE_METRICS._items.pop(NAME, None)
    sys.modules.pop(PLUGIN, None)


def metric_config(**overrides):
    return small_config(plugins=[PLUGIN], levels=["novice"], max_turns=2,
                        engine={"shard_size": 4, "shard_fn": "ray_knowsim.sim.shard:run_shard"}, **overrides)


@pytest.mark.usefixtures("ray_local")
def test_an_outside_metric_end_to_end(tmp_path, plugin_metric):
    from ray_knowsim.compare.pipeline import compare_runs
    from ray_knowsim.config import parse_run_config
    from ray_knowsim.run.fan_out import run
    from ray_knowsim.io.rundir import RunReader
    from ray_knowsim.report.build import build_report

    cfg = parse_run_config(metric_config())
    out = tmp_path / "run"
    outcome = run(cfg, output=out, quiet=True, tables=False)
    assert outcome.n_failed == 0 and outcome.n_ok == 8

    # in every session row, equal to the plugin's definition over the session's final state
    reader = RunReader.open(out)
    assert NAME in reader.sessions.names
    sessions = reader.sessions.read().to_pylist()
    last = {}
    for t in reader.turns.read(["session_id", "turn", "states"]).to_pylist():
        if t["turn"] >= last.get(t["session_id"], {}).get("turn", 0):
            last[t["session_id"]] = t
    assert len(sessions) == 8
    for row in sessions:
        states = last[row["session_id"]]["states"]
        assert row[NAME] == pytest.approx(sum(s == 3 for s in states) / len(states))
    assert len({row[NAME] for row in sessions}) > 1, "the metric does not vary: the check above proves little"
    # ... in the Parquet files themselves, as a float column beside the built-in ones
    files = [f.path for f in reader.sessions.files]
    assert files and all(pq.read_schema(f).field(NAME).type == "double" for f in files)

    # the report's metric table: its label, after the paper's four, and not in the paper's mean rank
    report = build_report(out, tmp_path / "report")
    labels = [s.label for s in report.content.specs]
    assert labels == ["KG", "DC", "CO", "IQ", "MS"]
    md = report.markdown_path.read_text()
    table_head = next(line for line in md.splitlines() if line.startswith("| Condition | n |"))
    assert "MS ↑" in table_head
    assert "MS: rank of the mean" not in md
    html = report.html_path.read_text()
    assert "mastery share" in html

    # compare: a paired row on it, worded with the metric's own phrase
    cmp_dir = tmp_path / "cmp"
    compare_runs([out], cmp_dir, metrics=["kg", NAME])
    import pandas as pd

    paired = pd.read_csv(cmp_dir / "paired.csv")
    rows = paired[paired["metric"] == NAME]
    assert len(rows) >= 1 and set(rows["higher_is_better"]) == {True}
    assert rows["n_items"].iloc[0] == 4
    assert all(NAME.upper() in s for s in rows["sentence"])


def test_the_sweep_refuses_an_outside_metric_by_name(plugin_metric):
    from ray_knowsim.sweep.config import SweepConfigError
    from ray_knowsim.sweep.runner import check_report_config

    from ray_knowsim.sweep.config import ReportConfig

    class Cfg:  # the part of a SweepConfig check_report_config reads
        report = ReportConfig(metrics=["kg", NAME])

    with pytest.raises(SweepConfigError, match="outside metric"):
        check_report_config(Cfg())  # type: ignore[arg-type]
    Cfg.report = ReportConfig(metrics=["kg", "nkg_es"])
    check_report_config(Cfg())  # type: ignore[arg-type]  # the built-ins stay choosable


def test_an_outside_metric_cannot_take_a_builtin_column(plugin_metric):
    from ray_knowsim.schema.metrics import Metric, register_metric

    with pytest.raises(MetricError, match="not a free column"):
        register_metric(Metric("kg_es", "X", "x", source="outside", early_stop=False, compute=lambda t: 0.0))
    with pytest.raises(MetricError, match="compute"):
        register_metric(Metric("other", "X", "x", source="outside", early_stop=False))
    assert [m.name for m in outside_metrics()] == [NAME]
