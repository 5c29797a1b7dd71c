"""The planning entry point: ray_knowsim.adaptive.replay(rows, spec) over per-session rows (no
sessions run, no Ray), and the spec lock's field names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ray_knowsim.adaptive import replay
from ray_knowsim.adaptive.rounds import spec_changes


def planted_rows(n_items=60, seed=1, trials=2, fail=()) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    mu = {"weak": 0.0, "mid": 0.6, "strong": 2.0}
    rows = []
    for it in range(n_items):
        base = rng.normal()
        for lv in ("novice", "advanced"):
            for c, m in mu.items():
                for tr in range(trials):
                    status = "error" if (c, it) in fail else "ok"
                    rows.append(dict(task="math", knowledge_level=lv, condition=c, item_id=f"q{it:03d}", trial=tr,
                                     status=status, kg=base + m + rng.normal() if status == "ok" else np.nan,
                                     co=float(rng.poisson(1.0))))
    return pd.DataFrame(rows)


def test_replay_returns_what_decisions_json_would_hold():
    rows = planted_rows()
    out = replay(rows, {"decide": "best", "metrics": ["kg"], "alpha": 0.05, "round": {"items": 5, "trials": 1}}, seed=7)
    assert out["quantity"].startswith("item win rate")
    assert out["spec"]["conditions"] == ["weak", "mid", "strong"] and out["spec"]["round"] == {"items": 5, "trials": 1}
    assert out["sessions_fixed"] == 60 * 2 * 3 * 1  # the rounds' trials, not the run's
    assert 0 < out["sessions_run"] <= out["sessions_fixed"]
    assert out["sessions_run"] == sum(r["sessions"] for r in out["rounds"])
    for d in out["decisions"]:
        assert d["decided"] and d["winner"] == "strong"
        for p in d["pairs"]:
            assert p["matched"] == p["wins"] + p["losses"] + p["ties"]
            assert p["verdict"] in {"a_better", "b_better", "open"}
            assert (p["verdict"] != "open") == (p["win_low"] > 0.5 or p["win_high"] < 0.5)
    assert out["status"] == "decided" and out["sessions_run"] < out["sessions_fixed"]
    assert out["fixed_design"]["decided"] == 2
    # the same rows and spec give the same answer
    assert replay(rows, {"decide": "best", "metrics": ["kg"], "round": {"items": 5, "trials": 1}}, seed=7) == out


def test_replay_checks_failure_rate_gaps_and_refuses_bad_input():
    rows = planted_rows(fail={("strong", i) for i in range(0, 60, 2)})
    out = replay(rows, {"metrics": ["kg"], "round": {"items": 10}})
    assert any({g["condition_a"], g["condition_b"]} & {"strong"} for g in out["failure_gaps"])
    with pytest.raises(ValueError, match="lack the columns"):
        replay(rows.drop(columns=["status"]), {})
    with pytest.raises(ValueError, match="no column for the metrics"):
        replay(rows, {"metrics": ["iq"]})
    with pytest.raises(ValueError):
        replay(rows, {"alpha": 2})


def test_spec_changes_name_the_fields():
    a = {"alpha": 0.05, "metrics": ["kg"], "round": {"items": 5, "trials": 1}}
    b = {"alpha": 0.1, "metrics": ["kg"], "round": {"items": 10, "trials": 1}}
    assert spec_changes(a, b) == ["alpha (0.05 -> 0.1)", "round.items (5 -> 10)"]
    assert spec_changes(a, a) == []


def test_a_decisions_file_of_another_format_is_refused_by_name(tmp_path):
    import json

    from ray_knowsim.adaptive.driver import locked_spec
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.io.decisions import DecisionsFormatError, read_decisions

    (tmp_path / "decisions.json").write_text(json.dumps({"format": 1, "decisions": []}))
    with pytest.raises(DecisionsFormatError, match="format 1"):
        read_decisions(tmp_path)
    with pytest.raises(RunError, match="cannot be resumed.*format 1"):
        locked_spec(tmp_path, {"alpha": 0.05})


def test_family_per_decision_tests_each_decision_at_full_alpha():
    rows = planted_rows(n_items=30)
    spec = {"decide": "best", "metrics": ["kg", "co"], "round": {"items": 5, "trials": 1}}
    run_family = replay(rows, spec)
    per_decision = replay(rows, {**spec, "family": "decision"})
    assert run_family["family_size"] == 2 * 2 * 3  # 2 levels x 2 metrics x 3 pairs
    levels = [p["level"] for d in per_decision["decisions"] for p in d["pairs"]]
    assert min(levels) >= 0.05 / 3 - 1e-12  # each decision is its own family of 3
    assert sum(d["decided"] for d in per_decision["decisions"]) >= sum(d["decided"] for d in run_family["decisions"])


def test_a_design_that_can_never_decide_is_refused_before_spending():
    from ray_knowsim.adaptive.driver import check_feasible
    from ray_knowsim.adaptive.rounds import Schedule
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.stats.adaptive import Procedure

    # 7 items, 3 levels x 2 metrics x 3 pairs = 18 at alpha 0.05: a unanimous 7-0 has p = 2^-6 > 0.05 / 18
    proc = Procedure.build(["own"], ["novice", "intermediate", "advanced"], ["kg", "co"], ["a", "b", "c"], "best", 0.05)
    small = Schedule.of({"own": [f"q{i}" for i in range(7)]}, 0, 5, ["novice"], 1)
    with pytest.raises(RunError, match="can never decide.*7 items < the 10"):
        check_feasible(proc, small, quiet=True)
    check_feasible(proc, Schedule.of({"own": [f"q{i}" for i in range(12)]}, 0, 5, ["novice"], 1), quiet=True)


def test_a_record_of_the_design_before_keeps_its_design_on_resume_and_replay(tmp_path):
    """decisions.json written before ``design.in_play`` existed (and with the old gamma -4): a resume
    whose config leaves the design to the defaults keeps the recorded design; one that names another
    design is refused naming the fields; the replay CLI's default spec is the recorded one."""
    import json

    from ray_knowsim.adaptive.driver import locked_spec, recorded_design
    from ray_knowsim.adaptive.rounds import procedure_for, spec_of
    from ray_knowsim.config.adaptive import AdaptiveConfig
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.io.decisions import read_decisions

    spec = {"decide": "best", "metrics": ["kg"], "round": {"items": 5, "trials": 1},
            "design": {"kind": "group_sequential", "spending": "hsd", "gamma": -4.0}}
    out = replay(planted_rows(n_items=30), {**spec, "design": {**spec["design"], "in_play": "candidates"}})
    record = {k: v for k, v in out.items() if k not in ("fixed_design", "sessions_available")}
    del record["spec"]["design"]["in_play"]  # as the version before wrote it
    (tmp_path / "decisions.json").write_text(json.dumps(record))
    old = read_decisions(tmp_path)
    assert old.spec["design"] == {"kind": "group_sequential", "spending": "hsd", "gamma": -4.0, "in_play": "candidates"}
    conditions = ["weak", "mid", "strong"]
    defaults = AdaptiveConfig.model_validate({k: v for k, v in spec.items() if k != "design"})
    assert (defaults.design.gamma, defaults.design.in_play) == (-6.0, "curtail")  # today's defaults
    kept = recorded_design(tmp_path, defaults)
    assert (kept.design.gamma, kept.design.in_play) == (-4.0, "candidates")
    locked_spec(tmp_path, spec_of(kept, conditions, 1))  # the same spec: resumes
    proc = procedure_for(kept, ["math"], ["novice"], conditions)
    assert proc.design.in_play == "candidates" and all(d.play == "candidates" for d in proc.decisions)
    named = AdaptiveConfig.model_validate({**spec, "design": {"gamma": -6.0}})
    with pytest.raises(RunError, match=r"design\.gamma \(-4\.0 -> -6\.0\)"):
        locked_spec(tmp_path, spec_of(recorded_design(tmp_path, named), conditions, 1))
    # a replay with the recorded spec decides what the record holds
    again = replay(planted_rows(n_items=30), old.spec)
    assert [d["winner"] for d in again["decisions"]] == [d.winner for d in old.decisions]
    assert again["sessions_run"] == old.sessions_run


def test_a_record_of_the_open_pairs_default_keeps_it_on_resume_and_replay(tmp_path):
    """decisions.json written under the ``in_play: open_pairs`` default (before ``curtail``): a
    resume leaving the design to the defaults keeps open_pairs; a config naming curtail is refused
    naming the field; the record's spec replays to the record."""
    import json

    from ray_knowsim.adaptive.driver import locked_spec, recorded_design
    from ray_knowsim.adaptive.rounds import procedure_for, spec_of
    from ray_knowsim.config.adaptive import AdaptiveConfig
    from ray_knowsim.plan.build import RunError
    from ray_knowsim.io.decisions import read_decisions

    spec = {"decide": "best", "metrics": ["kg"], "round": {"items": 5, "trials": 1}}
    out = replay(planted_rows(n_items=30), {**spec, "design": {"in_play": "open_pairs"}})
    (tmp_path / "decisions.json").write_text(json.dumps({k: v for k, v in out.items() if k not in ("fixed_design", "sessions_available")}))
    old = read_decisions(tmp_path)
    assert old.spec["design"]["in_play"] == "open_pairs"
    kept = recorded_design(tmp_path, AdaptiveConfig.model_validate(spec))
    assert kept.design.in_play == "open_pairs"
    locked_spec(tmp_path, spec_of(kept, ["weak", "mid", "strong"], 1))  # resumes
    assert all(d.play == "open_pairs" for d in procedure_for(kept, ["math"], ["novice"], ["weak", "mid", "strong"]).decisions)
    named = AdaptiveConfig.model_validate({**spec, "design": {"in_play": "curtail"}})
    with pytest.raises(RunError, match=r"design\.in_play \('open_pairs' -> 'curtail'\)"):
        locked_spec(tmp_path, spec_of(recorded_design(tmp_path, named), ["weak", "mid", "strong"], 1))
    again = replay(planted_rows(n_items=30), old.spec)
    assert again["sessions_run"] == old.sessions_run and again["spec"]["design"]["in_play"] == "open_pairs"


def _rows_of(values: dict[str, list[float]]) -> pd.DataFrame:
    """One task, one level, one session per item and condition, KG ``values[condition][item]``."""
    return pd.DataFrame([dict(task="math", knowledge_level="novice", condition=c, item_id=f"q{i:03d}", trial=0, match="s",
                              status="ok", kg=v) for c, vs in values.items() for i, v in enumerate(vs)])


def _compare_verdict(row) -> str:
    if row["better"] == row["condition_a"]:
        return "a_better"
    if row["better"] == row["condition_b"]:
        return "b_better"
    return "within_effect" if row["equivalent"] else "open"


# (b, c) tie on every item (within the effect at any level); a against each: 29 wins, 13 losses,
# 18 ties (sign test p = 0.0195, between alpha/3 and alpha/2) -- and, for Holm, c far above a and b
_DIFF = [1.0] * 29 + [-1.0] * 13 + [0.0] * 18
EQUIVALENT_AND_BORDERLINE = {"a": [2.0 + d for d in _DIFF], "b": [2.0] * 60, "c": [2.0] * 60}
HOLM_PASSES_ON = {"a": [2.0 + d for d in _DIFF], "b": [2.0] * 60, "c": [5.0] * 50 + [2.0] * 10}


@pytest.mark.parametrize("values,decide,effect", [(EQUIVALENT_AND_BORDERLINE, "pairs", 0.2), (HOLM_PASSES_ON, "best", None)],
                         ids=["pairs-effect", "best-holm"])
def test_the_replays_fixed_design_and_compare_give_the_same_verdicts_on_the_same_counts(values, decide, effect):
    """One family rule (stats.multiplicity.family_verdicts) for both: before, the replay's fixed
    design counted (b, c)'s equivalence as a rejection and claimed a better than b and c at
    alpha/2, where compare (alpha/3 with an effect) claimed nothing."""
    from ray_knowsim.compare.paired import CompareOptions, analyse

    rows = _rows_of(values)
    paired = analyse(rows.drop(columns=["status"]), options=CompareOptions(metrics=["kg"], family="level_metric",
                                                                           effect=effect))["paired"]
    paired = paired[paired["knowledge_level"] == "novice"]
    spec = {"decide": decide, "metrics": ["kg"], "family": "decision", "round": {"items": 5, "trials": 1}}
    out = replay(rows, spec | ({"effect": effect} if effect else {}))
    (fixed,) = out["fixed_design"]["decisions"]
    got = {(p["condition_a"], p["condition_b"]): (p["verdict"], p["level"]) for p in fixed["pairs"]}
    want = {(r["condition_a"], r["condition_b"]): (_compare_verdict(r), r["level"]) for _, r in paired.iterrows()}
    assert got.keys() == want.keys() and len(got) == 3
    for pair in got:
        assert got[pair][0] == want[pair][0], pair
        assert got[pair][1] == pytest.approx(want[pair][1]), pair
    if effect:
        assert got[("b", "c")][0] == "within_effect" and got[("a", "b")][0] == got[("a", "c")][0] == "open"
    else:
        assert all(v == "a_better" or v == "b_better" for v, _ in got.values())  # (a, b) at alpha once c's pairs are rejected
