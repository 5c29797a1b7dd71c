"""The procedure on hand-built frames: orientation of CO, the threshold, missing and tied sims."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ray_knowsim.validate import agreement as ag
from ray_knowsim.stats.association import binomial_p_greater


def human(rows):
    """rows: (arm, task, level, condition, metric, value)."""
    return pd.DataFrame(rows, columns=["arm", "task", "level", "condition", "metric", "value"])


def sim(rows, simulator="structured"):
    """rows: (arm, task, level, condition, metric, mean)."""
    df = pd.DataFrame(rows, columns=["arm", "task", "level", "condition", "metric", "mean"])
    return df.assign(simulator=simulator, n=2, sd=0.0)


def _pair(pairs, a, b, metric):
    hit = pairs[(pairs.condition_a == a) & (pairs.condition_b == b) & (pairs.metric == metric)]
    assert len(hit) == 1
    return hit.iloc[0]


def test_cognitive_overload_is_oriented_lower_is_better():
    h = human([("strategy", "math", "novice", "Socratic", "CO", v) for v in (1, 2)]
              + [("strategy", "math", "novice", "Adaptive", "CO", v) for v in (5, 6)])
    s = sim([("strategy", "math", "novice", "Socratic", "CO", 0.2), ("strategy", "math", "novice", "Adaptive", "CO", 0.9)])
    p = _pair(ag.pair_table(h, s, 0.15), "Socratic", "Adaptive", "CO")
    assert p.cliffs_delta == -1.0  # Socratic's overload is lower ...
    assert p.human_contrast == 1.0  # ... which is better
    assert p.sim_contrast == pytest.approx(0.7)
    assert p.high_signal and p.evaluable and p.agree
    # the same numbers under a higher-is-better metric also agree (both sides flip together)
    h2, s2 = h.assign(metric="DC"), s.assign(metric="DC")
    p2 = _pair(ag.pair_table(h2, s2, 0.15), "Socratic", "Adaptive", "DC")
    assert p2.human_contrast == -1.0 and p2.sim_contrast == pytest.approx(-0.7) and p2.agree


def test_threshold_is_inclusive_and_zero_delta_never_counts():
    # delta(Socratic, Adaptive) = 3/20 = 0.15 exactly; Comprehensive ties with Adaptive (delta 0)
    x, y = [2, 0, 0.5, 1], [0, 0, 1, 1, 1]
    h = human([("model", "expertqa", "advanced", "GPT-5.4", "IQ", v) for v in x]
              + [("model", "expertqa", "advanced", "Gemini 3 Pro", "IQ", v) for v in y]
              + [("model", "expertqa", "advanced", "Claude Opus 4.7", "IQ", v) for v in y])
    s = sim([("model", "expertqa", "advanced", c, "IQ", m) for c, m in (("GPT-5.4", 7), ("Gemini 3 Pro", 5), ("Claude Opus 4.7", 6))])
    at = ag.pair_table(h, s, 0.15)
    assert _pair(at, "GPT-5.4", "Gemini 3 Pro", "IQ").high_signal
    tie = _pair(at, "Gemini 3 Pro", "Claude Opus 4.7", "IQ")
    assert tie.cliffs_delta == 0 and not tie.high_signal and not tie.agree
    assert not _pair(ag.pair_table(h, s, 0.16), "GPT-5.4", "Gemini 3 Pro", "IQ").high_signal
    assert _pair(ag.pair_table(h, s, 0.0), "GPT-5.4", "Gemini 3 Pro", "IQ").high_signal
    assert not _pair(ag.pair_table(h, s, 0.0), "Gemini 3 Pro", "Claude Opus 4.7", "IQ").high_signal


def test_zero_sim_contrast_disagrees_and_missing_sim_is_not_evaluable():
    h = human([("strategy", "math", "novice", c, "DC", v) for c, vals in
               (("Socratic", (6, 7)), ("Adaptive", (1, 2)), ("Comprehensive", (3, 4))) for v in vals])
    s = sim([("strategy", "math", "novice", "Socratic", "DC", 0.5), ("strategy", "math", "novice", "Adaptive", "DC", 0.5)])
    pairs = ag.pair_table(h, s, 0.15)
    flat = _pair(pairs, "Socratic", "Adaptive", "DC")
    assert flat.evaluable and not flat.agree and flat.sim_contrast == 0
    missing = _pair(pairs, "Socratic", "Comprehensive", "DC")
    assert not missing.evaluable and math.isnan(missing.sim_diff)
    table = ag.agreement_table(pairs)
    overall = table[table.grouping == "overall"].iloc[0]
    assert (overall.k, overall.n, overall.n_high_signal, overall.n_not_evaluable) == (0, 1, 3, 2)


def test_agreement_table_counts_and_binomial_p():
    # 3 conditions, human order S > C > A on IQ; sim order S > A > C: (S,A) and (S,C) agree, (A,C) not
    h = human([("strategy", "math", "novice", c, "IQ", v) for c, vals in
               (("Socratic", (9, 9)), ("Adaptive", (1, 2)), ("Comprehensive", (5, 5))) for v in vals])
    s = sim([("strategy", "math", "novice", c, "IQ", m) for c, m in (("Socratic", 9), ("Adaptive", 6), ("Comprehensive", 4))])
    table = ag.agreement_table(ag.pair_table(h, s, 0.15))
    rows = {(r.grouping, r.group): r for r in table.itertuples()}
    assert set(rows) == {("overall", "all"), ("arm", "strategy"), ("task", "math"), ("level", "novice"),
                         ("metric", "IQ"), ("arm x task", "strategy/math")}
    for r in rows.values():
        assert (r.k, r.n) == (2, 3)
        assert r.p_value == pytest.approx(binomial_p_greater(2, 3))
        assert r.pct == pytest.approx(200 / 3)


def test_kg_is_math_only_and_cell_means_z_scores():
    frame = pd.DataFrame(
        [dict(arm="strategy", task=t, level="novice", condition=c, kg=k, dc=d, co=None, iq=None)
         for t in ("math", "expertqa") for c, k, d in (("Socratic", 0.5, 1.0), ("Adaptive", 0.25, 2.0), ("Comprehensive", 0.0, 3.0))]
    )
    hl = ag.human_long(frame)
    assert set(hl[hl.metric == "KG"].task) == {"math"}
    assert set(hl.metric) == {"KG", "DC"}
    s = sim([("strategy", "math", "novice", c, "KG", m) for c, m in (("Socratic", 3.0), ("Adaptive", 1.0), ("Comprehensive", 2.0))])
    cells = ag.cell_means(hl, s)
    kg = cells[(cells.metric == "KG")].set_index("condition")
    z = math.sqrt(1.5)
    assert kg.loc["Socratic", "human_z"] == pytest.approx(z) and kg.loc["Comprehensive", "human_z"] == pytest.approx(-z)
    assert kg.loc["Adaptive", "sim_z"] == pytest.approx(-z)
    assert list(kg.condition_code) == [0, 1, 2]
    # CO-style orientation flips the z of both sides
    co = ag.cell_means(hl.assign(metric=hl.metric.replace({"KG": "CO"})), s.assign(metric="CO"))
    assert co[(co.metric == "CO") & (co.task == "math") & (co.condition == "Socratic")].human_z.iloc[0] == pytest.approx(-z)
    rho = ag.spearman_table(cells)
    assert rho[rho.grouping == "overall"].rho.iloc[0] == pytest.approx(0.5)  # ranks (3,2,1) vs (3,1,2)
