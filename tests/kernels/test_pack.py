"""Packing sessions into the kernel's flat arrays, and the batch API's bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from ray_knowsim.kernels.sessions import COUNTER_INDEX, BatchState, run_batch, run_packed
from ray_knowsim.kernels.pack import (
    pack_graphs,
    pack_states,
    pack_trajectories,
    pack_turn,
    params_matrix,
    rule_params,
    session_offsets,
    unpack_states,
)
from ray_knowsim.kernels.update import N_PARAMS, NO_ID, NOT_IN_GRAPH, PARAM_NAMES
from ray_knowsim.schema.graph import IUGraph, build_index
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import paper_rules, reference_rules, rules_from


def graph(nodes, edges):
    raw = {"nodes": [{"id": n} for n in nodes], "edges": [{"from": a, "to": b} for a, b in edges]}
    return build_index(IUGraph.model_validate(raw))


# C <- B <- A, plus a duplicated edge, a self-loop and a prerequisite outside the graph; node order C, A, B
G1 = graph(["C", "A", "B"], [("A", "B"), ("B", "C"), ("X", "C"), ("B", "C"), ("A", "A")])
G2 = graph(["P", "Q"], [("P", "Q")])


def test_pack_graphs_layout():
    pg = pack_graphs([G1, G2])
    assert pg.node_off.tolist() == [0, 3, 5]
    assert pg.sizes.tolist() == [3, 2]
    assert pg.ids == (("C", "A", "B"), ("P", "Q"))
    # rows in node order; prerequisites in edge order, duplicates kept, unknown ids -> -1
    rows = [pg.pre_idx[pg.pre_off[r] : pg.pre_off[r + 1]].tolist() for r in range(5)]
    assert rows == [[2, NOT_IN_GRAPH, 2], [1], [1], [], [0]]
    assert pg.depth.tolist() == [G1.depth[v] for v in G1.ids] + [G2.depth[v] for v in G2.ids]
    assert pg.upd[:3].tolist() == [G1.order[v] for v in G1.update_order]
    assert pg.upd[3:].tolist() == [0, 1]


def test_rule_params_match_the_rules():
    r = reference_rules()
    row = rule_params(r, 20, max_turns=15)
    named = dict(zip(PARAM_NAMES, row.tolist()))
    assert row.shape == (N_PARAMS,)
    assert named["tau"] == 11 and named["hinge_n"] == 3  # spec §3 table for |G| = 20
    assert [named[f"w_state_{i}"] for i in range(4)] == list(r.w_state)
    assert [named[f"w_reasoning_{i}"] for i in range(4)] == list(r.w_reasoning)
    assert named["hinge"] == 1.0 and named["overload_flag_strict"] == 0.0 and named["max_turns"] == 15
    p = dict(zip(PARAM_NAMES, rule_params(paper_rules(), 9).tolist()))
    assert p["tau"] == 5 and p["hinge"] == 0.0 and p["overload_flag_strict"] == 1.0 and p["carry_persists"] == 1.0
    assert p["dropoff_softening"] == 1.0 and p["reset_carry_on_transition"] == 1.0
    floor = rule_params(rules_from("reference", capacity_floor=7), 6)
    assert floor[PARAM_NAMES.index("tau")] == 7


def test_params_matrix_per_session_and_shared():
    rules = [reference_rules(), paper_rules(), reference_rules()]
    m = params_matrix(rules, [20, 9, 6], [15, 3, 1])
    assert m.shape == (3, N_PARAMS)
    np.testing.assert_array_equal(m[0], rule_params(rules[0], 20, 15))
    np.testing.assert_array_equal(m[1], rule_params(rules[1], 9, 3))
    np.testing.assert_array_equal(params_matrix(reference_rules(), [6, 6]), np.stack([rule_params(reference_rules(), 6)] * 2))
    with pytest.raises(ValueError, match="2 rule configs for 3 sessions"):
        params_matrix(rules[:2], [1, 2, 3])
    with pytest.raises(ValueError, match="max_turns"):
        params_matrix(reference_rules(), [3], 0)


def test_states_round_trip_and_missing_ids():
    pg = pack_graphs([G1, G2])
    graph_of = np.array([1, 0, 0])
    s_off, state, carry = pack_states(pg, graph_of, [{"Q": 3}, {"C": 2, "B": 1, "zz": 3}, {}], [None, {"A": 0.25}, {}])
    assert s_off.tolist() == [0, 2, 5, 8]
    assert session_offsets(pg, graph_of).tolist() == s_off.tolist()
    assert state.dtype == np.int8 and carry.dtype == np.float64
    assert state.tolist() == [0, 3, 2, 0, 1, 0, 0, 0]
    assert carry.tolist() == [0, 0, 0, 0.25, 0, 0, 0, 0]
    back = unpack_states(pg, graph_of, s_off, state, carry)
    assert back[1] == ({"C": 2, "A": 0, "B": 1}, {"C": 0.0, "A": 0.25, "B": 0.0})


def test_pack_turn_codes_and_sentinels():
    pg = pack_graphs([G1, G2])
    e = [
        SignalEntry(
            id="B",
            teaching_quality="well_explained",
            user_attempt_type="reasoning",
            assistant_response_role="confirmed_incorrect_no_explanation",
        ),
        SignalEntry(id=None, teaching_quality="shallow", user_attempt_type="articulation"),
        SignalEntry(id="X", teaching_quality="great"),
        SignalEntry(id="", teaching_quality="not_mentioned", assistant_response_role="confirmed_incorrect_with_explanation"),
        SignalEntry(id="C", teaching_quality="shallow"),
    ]
    ps = pack_turn(pg, np.array([0, 1]), [e, [SignalEntry(id="Q")]])
    assert ps.off.tolist() == [0, 5, 6]
    assert ps.node.tolist() == [2, NO_ID, NOT_IN_GRAPH, NOT_IN_GRAPH, 0, 1]
    assert ps.tq.tolist() == [2, 1, 2, 0, 1, 0]
    assert ps.attempt.tolist() == [1, 2, 0, 0, 0, 0]
    assert ps.role.tolist() == [1, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="1 signal lists for 2 sessions"):
        pack_turn(pg, np.array([0, 1]), [e])


def test_pack_trajectories_segments():
    pg = pack_graphs([G1, G2])
    a = [SignalEntry(id="A", teaching_quality="shallow")]
    ps = pack_trajectories(pg, np.array([0, 1]), [[a, a + a, []], [a]], t_max=4)
    assert ps.t_max == 4 and ps.n_turns.tolist() == [3, 1]
    assert np.diff(ps.off).tolist() == [1, 2, 0, 0, 1, 0, 0, 0]
    assert ps.node.tolist() == [1, 1, 1, NOT_IN_GRAPH]  # "A" is not a node of G2
    with pytest.raises(ValueError, match="more than t_max"):
        pack_trajectories(pg, np.array([0]), [[a, a]], t_max=1)


def test_step_active_sessions_only():
    e = [SignalEntry(id="A", teaching_quality="well_explained")]
    b = BatchState([G1, G1, G2], reference_rules(), [{}, {}, {"P": 3}])
    out = b.step([e, e, [SignalEntry(id="Q", teaching_quality="well_explained")]], active=np.array([True, False, True]))
    assert out.shape == (3, len(COUNTER_INDEX))
    assert np.isnan(out[1]).all() and not np.isnan(out[[0, 2]]).any()
    assert b.turn.tolist() == [2, 1, 2]
    assert b.session(0)[0] == {"C": 0, "A": 1, "B": 0}
    assert b.session(1)[0] == {"C": 0, "A": 0, "B": 0}
    assert b.session(2)[0] == {"P": 3, "Q": 1}
    assert out[0, COUNTER_INDEX["ic_denominator"]] == 1
    out = b.step([[], e, []], active=[1])  # indices work too
    assert b.turn.tolist() == [2, 2, 2] and b.session(1)[0]["A"] == 1
    assert [s[0] for s in b.sessions()] == [b.session(i)[0] for i in range(3)]
    with pytest.raises(ValueError, match="1 signal lists for 3 sessions"):
        b.step([e])
    with pytest.raises(ValueError, match="one turn for each of the 3 sessions"):
        b.step(pack_turn(b.packed, b.graph_of[:2], [e, e]))


def test_step_sessions_groupings_give_the_same_states_and_counters():
    """The micro-batcher's call: however ready sessions group into calls (all at once, one by one,
    any order), every session's states, carries, counters and turn numbers are the same."""
    rng = np.random.default_rng(3)
    labels = ["well_explained", "shallow", "wrong", "not_addressed"]
    graphs = [G1, G2, G1, G2, G1]
    turns = [[[SignalEntry(id=g.ids[int(rng.integers(len(g.ids)))], teaching_quality=labels[int(rng.integers(4))])
               for _ in range(int(rng.integers(0, 3)))] for g in graphs] for _ in range(4)]

    def play(groupings):
        b = BatchState(graphs, reference_rules(), [{}, {"P": 2}, {"A": 1}, {}, {}], max_turns=4)
        counters = {}
        for t, groups in enumerate(groupings):
            for group in groups:
                out = b.step_sessions(group, [turns[t][s] for s in group])
                for s, row in zip(group, out):
                    counters[(t, s)] = row.tolist()
        return [b.session(s) for s in range(5)], b.turn.tolist(), counters

    together = play([[[0, 1, 2, 3, 4]]] * 4)
    whole = BatchState(graphs, reference_rules(), [{}, {"P": 2}, {"A": 1}, {}, {}], max_turns=4)  # step(): every session's row
    whole_counters = {(t, s): row.tolist() for t in range(4) for s, row in enumerate(whole.step(turns[t]))}
    assert ([whole.session(s) for s in range(5)], whole.turn.tolist(), whole_counters) == together
    half = BatchState(graphs, reference_rules(), [{}, {"P": 2}, {"A": 1}, {}, {}], max_turns=4)  # step() with an active list
    half_counters = {}
    for t in range(4):
        for group in ([4, 1], [0, 2, 3]):
            rows = half.step([turns[t][s] if s in group else [] for s in range(5)], active=group)
            half_counters.update({(t, s): rows[s].tolist() for s in group})
    assert ([half.session(s) for s in range(5)], half.turn.tolist(), half_counters) == together
    assert play([[[s] for s in (4, 2, 0, 3, 1)]] * 4) == together
    assert play([[[3, 1], [0], [4, 2]], [[2, 0, 4, 1, 3]], [[1], [3, 4, 0], [2]], [[0, 1], [2, 3, 4]]]) == together
    b = BatchState(graphs, reference_rules())
    with pytest.raises(ValueError, match="named twice"):
        b.step_sessions([1, 1], [[], []])
    with pytest.raises(IndexError, match="outside 0..4"):
        b.step_sessions([5], [[]])


def test_from_arrays_and_run_packed_checks():
    pg = pack_graphs([G1, G2])
    graph_of = np.array([0, 1])
    params = params_matrix(reference_rules(), pg.sizes[graph_of])
    b = BatchState.from_arrays(pg, graph_of, params, turn=4)
    assert b.turn.tolist() == [4, 4] and b.state.tolist() == [0] * 5
    with pytest.raises(ValueError, match="params must be"):
        BatchState.from_arrays(pg, graph_of, params[:1])
    trajs = pack_trajectories(pg, np.array([1]), [[[SignalEntry(id="P", teaching_quality="shallow")]]])
    with pytest.raises(ValueError, match="different graph"):
        run_packed(pg, np.array([0]), params[:1], trajs, np.array([0]))
    with pytest.raises(ValueError, match="pack_trajectories"):
        run_packed(pg, graph_of, params, pack_turn(pg, graph_of, [[], []]))
    res = run_packed(pg, np.array([1, 1]), params_matrix(reference_rules(), [2, 2]), trajs, np.array([0, 0]))
    assert res.counter("ic_denominator").tolist() == [[1.0], [1.0]]
    assert res.final(0)[0] == {"P": 1, "Q": 0}
    with pytest.raises(ValueError, match="record_states"):
        res.after_turn(0, 1)


def test_run_batch_history_and_uneven_turns():
    well = [SignalEntry(id="P", teaching_quality="well_explained"), SignalEntry(id="Q", teaching_quality="well_explained")]
    calm = rules_from("reference", capacity_floor=10)  # never overloaded: full steps
    res = run_batch([G2, G2], calm, [{}, {}], [[well, well, well], [well]], record_states=True)
    assert res.n_turns.tolist() == [3, 1]
    # Q is capped by P's state after P moved in the same turn (cascade in update order)
    assert [res.after_turn(0, t)[0] for t in (1, 2, 3)] == [{"P": 1, "Q": 1}, {"P": 2, "Q": 2}, {"P": 3, "Q": 3}]
    assert res.counter("n_upward_transitions")[0].tolist() == [2, 2, 2]
    assert res.after_turn(1, 1)[0] == {"P": 1, "Q": 1}
    assert np.isnan(res.counters[1, 1:]).all()
    assert (res.state_hist[1:, res.session_rows(1)] == res.state_hist[0, res.session_rows(1)]).all()
    with pytest.raises(IndexError):
        res.after_turn(1, 2)
