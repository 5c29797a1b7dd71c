"""The metric catalogue (ray_knowsim.schema.metrics) and every consumer agree.

The consumers that derive their lists from it are checked to derive what they held before (the
lists were written by hand, up to nine times, before the catalogue); the ones that cannot derive
-- the canonical computation (rules/final_metrics), the numba kernel's fixed counters, the
sweep's vectorised twin, the reference record's field names -- are checked against it, so a metric
added to the catalogue and not to them fails here, by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ray_knowsim.schema.metrics import BUILTIN_METRICS, find_metric, names, row_fields
from tests.doubles.trajectories import small_trajectory

FIXTURE = Path(__file__).parent / "fixtures" / "row_schemas_4ff0642.json"
STATE = [m for m in BUILTIN_METRICS if m.source == "state"]


def _fields(schema) -> list[list]:
    return [[f.name, str(f.type), f.nullable] for f in schema]


def test_the_row_schemas_are_those_of_runs_written_before_the_catalogue():
    """Derived from the catalogue, the session and turn Parquet schemas are field for field the ones
    main wrote at 4ff0642 (fixture made by that commit's own io.commits), so every run before it
    loads as it did."""
    from ray_knowsim.io.commits import SESSION_SCHEMA, TURN_SCHEMA, session_schema

    old = json.loads(FIXTURE.read_text())
    assert _fields(SESSION_SCHEMA) == old["sessions"]
    assert _fields(TURN_SCHEMA) == old["turns"]
    assert session_schema() == SESSION_SCHEMA  # no outside metric registered: the same schema


def test_the_derived_lists_are_the_ones_written_by_hand_before():
    from ray_knowsim.schema.results import COMPARE_METRICS, LOWER_IS_BETTER, RUN_METRICS, SESSION_METRICS
    from ray_knowsim.stats.ranks import MEAN_RANK_METRICS, MEAN_RANK_METRICS_ES
    from ray_knowsim.sweep.metrics import FLOAT_COLUMNS
    from ray_knowsim.sweep.source import RECORD_METRICS_ES

    assert SESSION_METRICS == ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "learning_experience")
    assert RUN_METRICS == (*SESSION_METRICS, "iq", *(f"{m}_es" for m in SESSION_METRICS))
    assert COMPARE_METRICS == ("kg", "nkg", "dc", "ic", "co", "po", "engagement", "iq")
    assert LOWER_IS_BETTER == {"co", "po", "co_es", "po_es"}
    assert MEAN_RANK_METRICS == ("kg", "dc", "co", "iq") and MEAN_RANK_METRICS_ES == ("kg_es", "dc_es", "co_es", "iq")
    assert FLOAT_COLUMNS[:7] == ("kg", "nkg", "dc", "dc_precision", "dc_recall", "dc_any", "dc_legacy")
    assert RECORD_METRICS_ES == {"knowledge_gain": "kg_es", "normalized_knowledge_gain": "nkg_es", "ic_f1": "ic_es",
                                 "perceived_overload": "po_es", "engagement": "engagement_es",
                                 "learning_experience": "learning_experience_es"}


def test_the_session_row_carries_every_metric_column_as_a_nullable_float():
    from ray_knowsim.schema.results import SessionRow

    for column in row_fields():
        assert SessionRow.model_fields[column].annotation == (float | None), column
    for m in BUILTIN_METRICS:
        assert all(c in SessionRow.model_fields for c in (*m.columns(), *m.columns("es"))), m.name


def test_the_canonical_computation_fills_exactly_the_catalogue_state_columns():
    """rules/final_metrics is where each state metric is computed (once); the trajectory's summary
    is the session row's source. Its names are the catalogue's, no more, no fewer."""
    from ray_knowsim.rules.final_metrics import paper_metrics

    traj, rules = small_trajectory()
    final = paper_metrics(traj.metrics, traj.initial, traj.final)
    assert set(final) == {c for m in STATE for c in m.columns()}
    summary = traj.summary(rules)
    assert {c for m in STATE for c in (*m.columns(), *m.columns("es"))} <= set(summary)
    assert not {k for k in summary if k.endswith("_es")} - set(names(source="state", variant="es"))


def test_the_reference_field_names_are_the_reference_records():
    from ray_knowsim.rules.final_metrics import reference_metrics

    traj, _ = small_trajectory()
    final = reference_metrics(traj.metrics, traj.initial, traj.final)
    prefix = reference_metrics(traj.metrics, traj.initial, traj.final, prefix_only=True)
    paper = dict(zip(["kg", "nkg", "ic", "co", "po", "engagement", "learning_experience"],
                     ["knowledge_gain", "normalized_knowledge_gain", "ic_f1", "perceived_overload_capacity", "perceived_overload",
                      "engagement", "learning_experience"]))
    for m in STATE:
        if m.reference:
            assert m.reference in final, m.name
            assert paper[m.name] == m.reference
        if m.reference_es:
            assert m.reference_es in prefix, m.name


def test_every_turn_input_is_a_kernel_counter_a_turn_metric_and_read_by_the_sweep():
    """The numba kernel's outputs are fixed (kernels/update.COUNTERS): a metric whose per-turn
    inputs it does not count cannot be computed for a run or re-scored by a sweep."""
    from ray_knowsim.kernels.update import COUNTERS
    from ray_knowsim.rules.turn_metrics import TurnMetrics
    from ray_knowsim.sweep.metrics import USED_COUNTERS

    fields = {f.name for f in dataclasses.fields(TurnMetrics)}
    for m in STATE:
        assert m.turn_inputs, f"{m.name}: the catalogue names no per-turn input"
        for name in m.turn_inputs:
            assert name in COUNTERS, f"{m.name}: {name} is no kernel counter"
            assert name in fields, f"{m.name}: {name} is no TurnMetrics field"
            assert name in USED_COUNTERS, f"{m.name}: the sweep's twin does not read {name}"


def test_the_sweeps_vectorised_twin_fills_every_catalogue_column():
    from ray_knowsim.rules.config import TerminationConfig
    from ray_knowsim.sweep.metrics import FLOAT_COLUMNS, USED_COUNTERS, Termination, summarize

    index = {name: k for k, name in enumerate(USED_COUNTERS)}
    out = summarize(np.zeros((2, 3, len(USED_COUNTERS))), index, np.array([3, 2]), np.array([4.0, 0.0]),
                    np.array([2, 2]), Termination.repeat([TerminationConfig()], 2))
    assert set(FLOAT_COLUMNS) <= set(out)
    assert {c for m in STATE for c in (*m.columns(), *m.columns("es"))} <= set(FLOAT_COLUMNS)


def test_report_labels_formats_and_directions_come_from_the_catalogue():
    from ray_knowsim.report.metrics import metric_specs

    for variant in ("final", "es"):
        for gain in ("kg", "nkg"):
            for spec in metric_specs(variant, gain):
                m = find_metric(spec.column)
                assert m is not None and spec.label == m.label and spec.decimals == m.decimals
                assert spec.lower_is_better == (not m.higher_is_better) and m.description in spec.description
    with pytest.raises(ValueError):
        metric_specs("later")  # type: ignore[arg-type]


def test_verdict_sentences_use_the_catalogue_phrase_for_either_variant():
    from ray_knowsim.compare.sentences import better_phrase

    for m in BUILTIN_METRICS:
        assert better_phrase(m.name) == m.phrase and m.phrase
        if m.es_name:
            assert better_phrase(m.es_name) == m.phrase
    assert better_phrase("iq@rejudged") == "interacts better"
    assert better_phrase("cost_usd") == "costs less" and better_phrase("turns") is None


def test_a_design_metric_is_one_the_tables_reduce():
    """The run config's choice of a decision metric (adaptive.metrics) is checked against the catalogue."""
    from ray_knowsim.config.adaptive import DECISION_METRICS
    from ray_knowsim.schema.results import RUN_METRICS

    assert DECISION_METRICS == frozenset(RUN_METRICS)
    assert {m for m in DECISION_METRICS if find_metric(m) is None} == set()


def test_the_catalogue_imports_nothing_of_the_session_row():
    """The dependency runs one way, results -> metrics, at module level and inside functions: the
    catalogue learns the row's other columns from results (reserve_columns), never by importing it."""
    import ast

    import ray_knowsim.schema.metrics as catalogue_module

    tree = ast.parse(Path(catalogue_module.__file__).read_text(encoding="utf-8"))
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [m for m in imported if m and m.startswith("ray_knowsim.schema")] == []


def test_no_outside_metric_takes_a_column_of_the_session_row():
    """Not the catalogue's columns, not the row's others (identity, tokens, cost: declared by results),
    and the row model refuses one that slipped in before results declared them."""
    from ray_knowsim.schema import results
    from ray_knowsim.schema.metrics import OUTSIDE_METRICS, Metric, MetricError, register_metric

    def outside(name):
        return Metric(name, "X", "x", source="outside", early_stop=False, compute=lambda t: 0.0)

    for name in ("kg", "dc_recall", "kg_es", "iq", "run_id", "tokens_judge", "cost_usd", "llm_truncations_assistant", "not-an-id"):
        with pytest.raises(MetricError, match="not a free column"):
            register_metric(outside(name))
    OUTSIDE_METRICS.register("run_id", outside("run_id"))  # as if registered before results was imported
    try:
        with pytest.raises(MetricError, match="not a free column"):
            results.session_row_model()
    finally:
        OUTSIDE_METRICS._items.pop("run_id", None)
    assert results.session_row_model() is results.SessionRow
