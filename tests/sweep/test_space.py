"""Expanding the parameter space: paths, grid/random/list, validation before any work."""

from __future__ import annotations

import pytest

from ray_knowsim.rules.config import RuleConfig, paper_rules
from ray_knowsim.sweep.config import BaseRules, SpaceConfig, SweepConfigError, parse_sweep_config
from ray_knowsim.sweep.space import changes_init, expand, get_path, set_path


def space(**kw) -> SpaceConfig:
    return SpaceConfig.model_validate(kw)


def test_default_is_setting_zero_and_duplicates_of_it_are_dropped():
    settings = expand(space(grid={"capacity_ratio": [0.45, 0.55, 0.65]}), BaseRules())
    assert [s.origin for s in settings] == ["default", "grid", "grid"]
    assert settings[0].rules == RuleConfig()
    assert [s.params["capacity_ratio"] for s in settings] == [0.55, 0.45, 0.65]
    assert len({s.key for s in settings}) == 3


def test_nested_paths_wildcards_and_tuple_entries():
    settings = expand(
        space(
            explicit=[
                {"termination.window": 5, "termination.rule": "paper"},
                {"init_ratios.*.partial": 0.05},
                {"w_state.0": 2.0},
                {"w_reasoning": [1, 1, 1, 1]},
                {"termination": {"min_turn": 4}},
            ]
        ),
        BaseRules(),
    )
    r = [s.rules for s in settings]
    assert r[1].termination.window == 5 and r[1].termination.rule == "paper" and r[1].termination.min_turn == 3
    assert {lv: x.partial for lv, x in r[2].init_ratios.items()} == dict.fromkeys(("novice", "intermediate", "advanced"), 0.05)
    assert r[2].init_ratios["novice"].known == 0.10  # only the named field changes
    assert r[3].w_state == (2.0, 1.0, 0.7, 0.35)
    assert r[4].w_reasoning == (1.0, 1.0, 1.0, 1.0)
    assert r[5].termination.min_turn == 4 and r[5].termination.window == 3  # mapping merged, not replaced
    assert changes_init(r[2], r[0]) and not changes_init(r[1], r[0])


def test_base_preset_and_overrides_define_the_default():
    settings = expand(space(grid={"hinge": [True]}), BaseRules(preset="paper", overrides={"dropoff_softening": 1.1}))
    assert settings[0].rules == paper_rules().model_copy(update={"dropoff_softening": 1.1})
    assert settings[1].rules.hinge is True and settings[1].rules.preset == "paper"


def test_random_draws_are_seeded_and_within_bounds():
    sp = space(random={"n": 50, "seed": 3, "params": {"capacity_ratio": {"uniform": [0.3, 0.8]}, "termination.window": {"int": [2, 5]},
                                                     "hinge": {"choice": [True, False]}, "dropoff_softening": {"log_uniform": [0.5, 2.0]}}})  # fmt: skip
    a, b = expand(sp, BaseRules()), expand(sp, BaseRules())
    assert [s.key for s in a] == [s.key for s in b]
    assert len(a) == 51
    for s in a[1:]:
        assert 0.3 <= s.rules.capacity_ratio <= 0.8 and 2 <= s.rules.termination.window <= 5
        assert 0.5 <= s.rules.dropoff_softening <= 2.0
    assert {s.rules.termination.window for s in a[1:]} == {2, 3, 4, 5}


def test_a_setting_breaking_a_precondition_is_rejected_with_all_culprits_named():
    sp = space(grid={"w_state.1": [1.0, -0.5]}, explicit=[{"dropoff_softening": 0}, {"hinge_tail": 1.5}])
    with pytest.raises(SweepConfigError) as err:
        expand(sp, BaseRules())
    msg = str(err.value)
    assert "3 of 4 settings break a rule precondition" in msg
    assert "w_state must be non-negative" in msg and "dropoff_softening" in msg and "hinge_tail" in msg


@pytest.mark.parametrize(
    "path, hint",
    [("capcity_ratio", "did you mean 'capacity_ratio'"), ("termination.windw", "did you mean 'window'"),
     ("w_state.7", "not an index 0..3"), ("init_ratios.expert.known", "no field 'expert'"), ("hinge.x", "below a plain value")],
)  # fmt: skip
def test_unknown_parameters_fail_with_a_hint(path, hint):
    with pytest.raises(SweepConfigError, match=hint.replace(".", r"\.")):
        expand(space(grid={path: [1]}), BaseRules())


def test_path_helpers_round_trip():
    tree = RuleConfig().model_dump(mode="json")
    set_path(tree, "termination.window", 7)
    set_path(tree, "init_ratios.*.known", 0.5)
    assert get_path(tree, "termination.window") == 7 and get_path(tree, "init_ratios.*.known") == 0.5


def test_config_rejects_bad_distributions_and_keys():
    with pytest.raises(SweepConfigError, match="exactly one of"):
        parse_sweep_config({"source": {"run_dir": "x"}, "space": {"random": {"n": 2, "params": {"hinge_tail": {}}}}})
    with pytest.raises(SweepConfigError, match="lower bound"):
        parse_sweep_config({"source": {"run_dir": "x"}, "space": {"random": {"n": 2, "params": {"hinge_tail": {"uniform": [1, 0]}}}}})
    with pytest.raises(SweepConfigError, match="spaces"):
        parse_sweep_config({"source": {"run_dir": "x"}, "spaces": {}})
