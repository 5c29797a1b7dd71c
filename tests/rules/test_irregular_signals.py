"""Hand-worked cases pinning the semantics of irregular extractor output (issue 9; spec §1.5,
§7.4, §7.7, §9.1): each test fails if its rule is changed, in the rules and, where the value
flows through it, in the kernel and the sweep re-scoring too."""

from __future__ import annotations

import pytest

from ray_knowsim.schema.graph import IUGraph, build_index
from ray_knowsim.schema.signals import TQ_NOT_MENTIONED, TQ_SHALLOW, TQ_WELL, normalize_entry, normalize_signals
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.final_metrics import KSBasis, headroom, ks_basis, raw_progress
from ray_knowsim.rules.reference_record import replay_record
from ray_knowsim.rules.update import well_explained_ids
from ray_knowsim.sweep.conversation import Conversation, compact_turn

# 14 IUs (tau = round(0.55 * 14) = 8 under the reference preset, so small loads never overload);
# V needs P1 and P2.
NODES = ["A", "B", "C", "P1", "P2", "V"] + [f"Y{k}" for k in range(1, 9)]
GRAPH = IUGraph.model_validate(
    {
        "nodes": [{"id": v, "concept": v.lower()} for v in NODES],
        "edges": [{"from": "P1", "to": "V"}, {"from": "P2", "to": "V"}],
    }
)
G = build_index(GRAPH, "t")


def label(v: str) -> str:
    return f"{v}: {v.lower()}"


def ks(states: dict[str, str]) -> dict:
    return {k: {"state": s} for k, s in states.items()}


def record(initial: dict, turns: list) -> dict:
    return {"problem_id": "t", "initial_knowledge_state": initial, "iu_analysis_history": turns, "turns": len(turns)}


# -- 1. a present null teaching_quality is not repaired ----------------------------------------


def test_null_teaching_quality_is_present_not_repaired():
    null = normalize_entry({"id": "A", "teaching_quality": None, "teaching_quality_reasoning": "ok -> shallow"})
    absent = normalize_entry({"id": "A", "teaching_quality_reasoning": "ok -> shallow"})
    assert null.tq_code == TQ_WELL and null.mentioned  # null reads as well_explained
    assert absent.tq_code == TQ_SHALLOW  # only an absent key is repaired from the text


def test_null_teaching_quality_advances_a_struggling_iu():
    # A struggling: a (repaired) shallow mention keeps it at 1, the null one (= well) lifts it to 2
    init = ks({label(v): "unaware" for v in NODES}) | ks({label("A"): "struggling"})
    null_turn = [{"id": "A", "teaching_quality": None, "teaching_quality_reasoning": "-> shallow"}]
    absent_turn = [{"id": "A", "teaching_quality_reasoning": "-> shallow"}]
    traj_null, _ = replay_record(record(init, [null_turn]), G, reference_rules())
    traj_absent, _ = replay_record(record(init, [absent_turn]), G, reference_rules())
    assert traj_null.final["A"] == 2
    assert traj_absent.final["A"] == 1
    assert traj_null.metrics[0].n_upward_transitions == 1 and traj_absent.metrics[0].n_upward_transitions == 0


# -- 2. the arrow label must end at a word boundary ---------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("the tutor -> shallowly touched it", "not_mentioned"),
        ("-> shallowly, then -> well_explained", "well_explained"),
        ("rated →shallow.", "shallow"),
        ("-> shallow_ish", "not_mentioned"),
        ("->  Well_Explained!", "well_explained"),
        ("-> not_mentioned2 -> not_mentioned", "not_mentioned"),
        ("shallow, no arrow", "not_mentioned"),
        ("a -> well_explainedness b -> shallow", "shallow"),
    ],
)
def test_arrow_repair_needs_a_word_boundary(text, expected):
    assert normalize_entry({"id": "A", "teaching_quality_reasoning": text}).teaching_quality == expected


def test_compact_signals_read_irregular_entries_as_the_rules_do():
    raw = [
        {"id": "A", "teaching_quality": None},
        {"id": "A", "teaching_quality_reasoning": "-> shallowly"},
        {"id": "A", "teaching_quality_reasoning": "-> shallow."},
        {"id": "A", "teaching_quality": "shallow", "user_attempt_type": ["odd"], "assistant_response_role": "x"},
        "junk",
    ]
    codes = [(c.id, c.tq_code, c.attempt_code) for c in compact_turn(raw)]
    assert codes == [("A", TQ_WELL, 0), ("A", TQ_NOT_MENTIONED, 0), ("A", TQ_SHALLOW, 0), ("A", TQ_SHALLOW, 0)]
    assert [(e.id, e.tq_code, e.attempt_code) for e in normalize_signals(raw)] == codes


# -- 3. explained_concepts grows from the last entry of each id -----------------------------------


def test_explained_concepts_use_the_last_entry_of_each_id():
    turn = [
        {"id": "A", "teaching_quality": "well_explained"},
        {"id": "A", "teaching_quality": "shallow"},  # overrides: A does not count
        {"id": "B", "teaching_quality": "shallow"},
        {"id": "B", "teaching_quality": "well_explained"},  # B counts
        {"id": "C", "teaching_quality": "well_explained"},
        {"id": "C", "teaching_quality": "not_mentioned"},  # overridden by not_mentioned: C does not count
        {"id": "Q9", "teaching_quality": "well_explained"},  # not a graph IU
        {"teaching_quality": "well_explained"},  # no id
    ]
    assert well_explained_ids(G, normalize_signals(turn)) == ["B"]
    init = ks({label(v): "unaware" for v in NODES})
    traj, view = replay_record(record(init, [turn, [{"id": "A", "teaching_quality": "well_explained"}]]), G, reference_rules())
    assert view["explained_concepts"] == [label("A"), label("B")]  # A from turn 2
    assert traj.explained_concepts(G) == view["explained_concepts"]


# -- 4. reference-format absorbed_ic counts mention entries, any-partial ceiling ---------------


def _absorbed_case():
    # V: prerequisites P1 (partial) and P2 (struggling): weakest-prereq ceiling 1 (outside Z_t),
    # any-partial ceiling 2. A: no prerequisites. Each mentioned twice, both rise 0 -> 1.
    init = ks({label(v): "unaware" for v in NODES}) | ks({label("P1"): "partial_understanding", label("P2"): "struggling"})
    turn = [
        {"id": "V", "teaching_quality": "well_explained"},
        {"id": "A", "teaching_quality": "shallow"},
        {"id": "V", "teaching_quality": "well_explained"},
        {"id": "A", "teaching_quality": "well_explained"},
    ]
    return init, turn


def test_reference_absorbed_count_counts_entries_with_the_any_partial_ceiling():
    init, turn = _absorbed_case()
    traj, view = replay_record(record(init, [turn]), G, reference_rules())
    m = traj.metrics[0]
    assert (traj.final["V"], traj.final["A"]) == (1, 1)
    assert m.absorbed_ic_numerator == 1  # our exact |A_t|: A only (V is outside Z_t)
    assert m.absorbed_ic_numerator_any_partial == 4  # entries: V twice + A twice
    assert view["turn_metrics_history"][0]["absorbed_ic_numerator"] == 4
    assert view["metrics"]["absorbed_ic_numerator_total"] == 4
    assert view["metrics"]["absorbed_ic_precision"] == 4 / 4  # ic_denominator = 4 mention entries
    # load 4 x 1.75 = 7 < tau = 8 (no dropoff); Z_t = every IU but V (ceiling 1): 13, recall 4/13
    assert view["turn_metrics_history"][0]["effective_load"] == 7.0
    assert view["metrics"]["absorbed_ic_recall"] == 4 / 13


def test_kernel_counts_absorbed_entries_like_the_rules():
    from ray_knowsim.kernels.sessions import run_batch

    init, turn = _absorbed_case()
    traj, _ = replay_record(record(init, [turn]), G, reference_rules())
    res = run_batch([G], reference_rules(), [traj.initial], [traj.entries])
    assert res.counter("absorbed_ic_numerator_any_partial")[0, 0] == 4
    assert res.counter("absorbed_ic_numerator")[0, 0] == 1


# -- 5. KG normalisation over the initial KS's labels --------------------------------------------


def _basis_case():
    # the initial KS names A (partial) and an extra label X (struggling); B and the other graph IUs
    # are missing (they start unaware but are not part of H, n or raw progress)
    init = {label("A"): {"state": "partial_understanding"}, "X: extra": {"state": "struggling"}}
    turns = [
        [{"id": "A", "teaching_quality": "well_explained"}, {"id": "B", "teaching_quality": "well_explained"}],
    ]
    return init, turns


def test_ks_basis_and_the_normalisations():
    init, _ = _basis_case()
    basis = ks_basis(G, init)
    assert basis == KSBasis(nodes=("A",), extra=(1,))
    initial = {v: 0 for v in NODES} | {"A": 2}
    final = {v: 0 for v in NODES} | {"A": 3, "B": 1}
    h = headroom(initial, basis)
    assert (h.headroom, h.n_ius) == (1 + 2, 2)
    assert raw_progress(initial, final, basis) == 1  # B's gain is not counted, X never progresses
    # the graph's nodes when the KS names exactly them
    assert ks_basis(G, ks({label(v): "unaware" for v in NODES})) is None
    assert headroom(initial).headroom == 1 + 3 * 13


def test_replay_normalises_over_the_initial_ks_labels():
    init, turns = _basis_case()
    traj, view = replay_record(record(init, turns), G, reference_rules())
    m = view["metrics"]
    assert m["knowledge_gain"] == 2.0  # A 2 -> 3, B 0 -> 1: every gain counts in KG
    assert m["normalized_knowledge_gain"] == 2 / 3
    assert m["raw_state_progress"] == 1
    assert m["normalized_knowledge_gain_3N"] == 1 / 6
    es = view["metrics_at_early_stop"]
    assert es["normalized_knowledge_gain"] == 2 / 3 and es["normalized_knowledge_gain_3N"] == 1 / 6
    assert traj.summary(reference_rules())["nkg"] == 2 / 3


def test_label_without_final_entry_reads_unaware():
    # a label whose state is unrecognised reads as unaware at t = 0 and counts 3 in H
    init = {label("A"): {"state": "knows_well"}, "X: extra": {"state": "bogus"}, "Y: y": "not a dict"}
    traj, view = replay_record(record(init, [[{"id": "B", "teaching_quality": "well_explained"}]]), G, reference_rules())
    assert view["metrics"]["knowledge_gain"] == 1.0
    assert view["metrics"]["normalized_knowledge_gain"] == 1 / 6  # H = 0 (A) + 3 (X) + 3 (Y)
    assert view["metrics"]["raw_state_progress"] == 0
    assert view["metrics"]["normalized_knowledge_gain_3N"] == 0.0


@pytest.mark.parametrize("backend", ["python", "kernel"])
def test_sweep_normalises_over_the_initial_ks_labels(backend):
    from ray_knowsim.rules.reference_record import initial_from_ks
    from ray_knowsim.sweep.rescore import prepare, rescore
    from ray_knowsim.sweep.space import Setting

    init, turns = _basis_case()
    initial, carries = initial_from_ks(G, init)
    conv = Conversation(
        position=0, key="c", graph=G, initial=initial, carries=None, turns=[compact_turn(t) for t in turns],
        max_turns=1, basis=ks_basis(G, init),
    )  # fmt: skip
    setting = Setting(index=0, origin="default", overrides={}, rules=reference_rules(), key="k")
    row = rescore(prepare([conv], backend), [setting]).to_pylist()[0]
    assert row["kg"] == 2.0
    assert row["nkg"] == 2 / 3 and row["nkg_es"] == 2 / 3
    assert row["raw_state_progress"] == 1
