"""What must agree between runs (pure parts of compare/runs.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from ray_knowsim.compare.runs import IncompatibleRuns, LoadedRun, check_compatible, first_difference, run_identity


def manifest(**over):
    cfg = {"rules": {"preset": "reference", "overrides": {}}, "max_turns": 3, "early_stop": "virtual", "graph_mode": "strict",
           "roles": {"user_sim": {"model": "sim"}, "extractor": {"model": "sim"}},
           "models": {"sim": {"backend": "offline", "name": None, "options": {}, "price": None}}}
    cfg.update(over)
    return {"config": cfg}


SESSIONS = pd.DataFrame({"task": ["math", "math"], "item_id": ["a", "b"], "knowledge_level": ["novice", "novice"]})


def loaded(path, m, sessions=SESSIONS):
    return LoadedRun(path=path, label=path, identity=run_identity(m, sessions), conditions=["x"], sessions=sessions)


def test_first_difference_names_the_path():
    assert first_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c 2 != 3"
    assert first_difference({"a": 1}, {"a": 1}) is None
    assert first_difference({"a": [1, 2]}, {"a": [1]}) == "a [1, 2] != [1]"


def test_prices_and_operational_knobs_do_not_block_a_merge():
    a = manifest()
    b = manifest(models={"sim": {"backend": "offline", "name": None, "options": {}, "price": {"input": 1, "output": 2}}})
    check_compatible([loaded("runs/a", a), loaded("runs/b", b)])


@pytest.mark.parametrize("change,message", [
    ({"rules": {"preset": "reference", "overrides": {"dropoff_softening": 1.0}}}, "runs/b: rules.dropoff_softening 1.0 != 1.3 in runs/a"),
    ({"max_turns": 5}, "runs/b: simulator.max_turns 5 != 3 in runs/a"),
    ({"roles": {"user_sim": {"model": "sim", "temperature": 0.2}, "extractor": {"model": "sim"}}},
     "runs/b: simulator.user_sim.temperature 0.2 != 0.7 in runs/a"),
])
def test_incompatible_runs_name_the_first_difference(change, message):
    with pytest.raises(IncompatibleRuns) as err:
        check_compatible([loaded("runs/a", manifest()), loaded("runs/b", manifest(**change))])
    assert str(err.value) == message


def test_other_items_or_levels_refuse():
    other = SESSIONS.assign(item_id=["a", "c"])
    with pytest.raises(IncompatibleRuns, match=r"runs/b: items.math \['a', 'c'\] != \['a', 'b'\] in runs/a"):
        check_compatible([loaded("runs/a", manifest()), loaded("runs/b", manifest(), other)])
    adv = SESSIONS.assign(knowledge_level=["advanced", "advanced"])
    with pytest.raises(IncompatibleRuns, match="levels"):
        check_compatible([loaded("runs/a", manifest()), loaded("runs/b", manifest(), adv)])
