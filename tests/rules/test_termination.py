from ray_knowsim.rules.config import paper_rules, reference_rules
from ray_knowsim.rules.termination import TurnSignal, early_stop


def turns(spec):
    """spec: list of (overload, n_upward, mastery_share, nothing_mentioned)"""
    return [TurnSignal(*t) for t in spec]


REF = reference_rules().termination
PAPER = paper_rules().termination


def test_reference_overload_needs_two_of_three_overloaded_and_at_most_one_upward():
    assert early_stop(turns([(True, 0, 0, False)] * 2), REF) is None  # t >= 3 required
    stop = early_stop(turns([(True, 0, 0, False), (False, 1, 0, False), (True, 0, 0, False)]), REF)
    assert (stop.turn, stop.index, stop.reason) == (3, 2, "cognitive_overload")
    assert early_stop(turns([(True, 1, 0, False), (True, 1, 0, False), (False, 0, 0, False)]), REF) is None


def test_mastery_is_all_ius_in_reference_and_80_percent_in_paper():
    seq = turns([(False, 1, 0.5, False), (False, 1, 0.8, False), (False, 1, 1.0, False)])
    assert early_stop(seq, REF).turn == 3
    assert early_stop(seq, PAPER).turn == 2
    assert early_stop(seq, PAPER).reason == "mastery"


def test_mastery_wins_ties_with_overload():
    seq = turns([(True, 0, 0, False), (True, 0, 0, False), (True, 0, 1.0, False)])
    assert early_stop(seq, REF).reason == "mastery"


def test_paper_rule_two_of_three_symptoms_over_five_turns():
    quiet = (False, 0, 0.0, True)  # zero upward and nothing mentioned: two symptoms
    assert early_stop(turns([quiet] * 4), PAPER) is None  # t >= 5
    assert early_stop(turns([quiet] * 5), PAPER).turn == 5
    busy = (True, 1, 0.0, False)  # only the overload symptom
    assert early_stop(turns([busy] * 8), PAPER) is None
    stuck = (True, 0, 0.0, False)  # overloaded and no progress
    assert early_stop(turns([busy, stuck, stuck, stuck, stuck]), PAPER) is None  # upward sum 1 > 0
    assert early_stop(turns([stuck] * 5), PAPER).turn == 5
