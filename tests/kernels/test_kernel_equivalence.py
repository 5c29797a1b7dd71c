"""The numba kernel is bit-identical to the plain-Python rules (rules.update + rules.turn_metrics).

Random sessions (graphs of 1-24 IUs, cyclic ones, self-loops, duplicated edges, shuffled node order,
prerequisite ids outside the graph; random states and carries; 1-5 turns of signal lists with
duplicated, unknown, empty and missing ids and every tq / attempt / role value) under the
reference preset, the paper preset and random valid RuleConfigs, many sessions of different graphs
and rules packed into one call. Every state, carry and counter must be exactly equal (floats
included: the kernel uses the Python's operation order).
"""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ray_knowsim.kernels.sessions import BatchState, run_batch, run_packed
from ray_knowsim.kernels.pack import counters_dict, pack_graphs, pack_states, pack_trajectories, params_matrix
from ray_knowsim.schema.graph import GraphWarning, IUGraph, build_index, check_graph, parse_graph
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.schema.states import STATE_NAMES
from ray_knowsim.rules.config import paper_rules, reference_rules, rules_from
from ray_knowsim.rules.reference_record import initial_from_ks, replay_record
from ray_knowsim.rules.trajectory import Trajectory, run_trajectory
from tests.doubles.kernel_sessions import diff, expected_row, random_batch, random_entry, random_index, random_rules, random_session, Session

# ---------------------------------------------------------------- expected values from the rules


def python_trajectory(s: Session) -> Trajectory:
    return run_trajectory(s.g, s.initial, s.signals, s.rules, initial_carries=s.carries, max_turns=s.max_turns)


def assert_matches_python(sessions: list[Session], parallel: bool) -> None:
    res = run_batch(
        [s.g for s in sessions],
        [s.rules for s in sessions],
        [s.initial for s in sessions],
        [s.signals for s in sessions],
        carries=[s.carries for s in sessions],
        max_turns=[s.max_turns for s in sessions],
        record_states=True,
        parallel=parallel,
    )
    for i, s in enumerate(sessions):
        traj = python_trajectory(s)
        assert res.n_turns[i] == len(traj.updates)
        for t, (u, m) in enumerate(zip(traj.updates, traj.metrics)):
            where = f"session {i} (|G|={s.g.size}, preset {s.rules.preset}), turn {t + 1}"
            bad = diff(counters_dict(res.counters[i, t]), expected_row(u, m))
            assert not bad, f"{where}: counters differ {bad}"
            states, carries = res.after_turn(i, t + 1)
            assert states == u.post, f"{where}: states differ {diff(states, u.post)}"
            assert carries == u.carries, f"{where}: carries differ {diff(carries, u.carries)}"
        assert np.isnan(res.counters[i, len(traj.updates) :]).all()
        assert res.final(i) == (traj.final, traj.updates[-1].carries)

    # the turn-by-turn API gives the same numbers (sessions with fewer turns sit out)
    batch = BatchState(
        [s.g for s in sessions],
        [s.rules for s in sessions],
        [s.initial for s in sessions],
        [s.carries for s in sessions],
        max_turns=[s.max_turns for s in sessions],
        parallel=parallel,
    )
    for t in range(int(res.n_turns.max())):
        active = res.n_turns > t
        out = batch.step([s.signals[t] if t < len(s.signals) else [] for s in sessions], active=active)
        np.testing.assert_array_equal(out[active], res.counters[active, t])
        assert np.isnan(out[~active]).all()
    np.testing.assert_array_equal(batch.state, res.state)
    np.testing.assert_array_equal(batch.carry, res.carry)


# ---------------------------------------------------------------- tests


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_sessions=st.integers(1, 24), max_size=st.integers(1, 24))
def test_kernel_equals_python_hypothesis(seed, n_sessions, max_size):
    assert_matches_python(random_batch(seed, n_sessions, max_size), parallel=False)


@pytest.mark.slow  # the bulk case: ~7 s CPU
def test_kernel_equals_python_bulk_parallel():
    """1,500 random sessions in ONE call through the threaded kernel."""
    assert_matches_python(random_batch(20261129, 1500), parallel=True)


@pytest.mark.parametrize("preset", ["reference", "paper"])
def test_presets_on_overloaded_realistic_turns(preset):
    """Both presets on realistic signal lists that overload often (ties L == tau included)."""
    rng = random.Random(7 if preset == "reference" else 8)
    rules = rules_from(preset)
    sessions = []
    for _ in range(250):
        s = random_session(rng, rng.randint(6, 24))
        s.rules = rules
        s.signals = [[random_entry(rng, [v]) for v in s.g.ids] for _ in range(5)]
        sessions.append(s)
    assert_matches_python(sessions, parallel=False)


def test_one_trajectory_under_many_settings_shares_arrays():
    """The sweep layout: K rule settings x C conversations reuse packed graphs and trajectories."""
    rng = random.Random(3)
    convs = random_batch(11, 40)
    settings_ = [reference_rules(), paper_rules()] + [random_rules(rng) for _ in range(8)]
    distinct = list({id(c.g): c.g for c in convs}.values())
    packed = pack_graphs(distinct)
    conv_graph = np.array([distinct.index(c.g) for c in convs])
    trajs = pack_trajectories(packed, conv_graph, [c.signals for c in convs])
    traj_of = np.tile(np.arange(len(convs)), len(settings_))
    graph_of = conv_graph[traj_of]
    rules = [r for r in settings_ for _ in convs]
    params = params_matrix(rules, packed.sizes[graph_of], [convs[j].max_turns for j in traj_of])
    _, state, carry = pack_states(packed, graph_of, [convs[j].initial for j in traj_of], [convs[j].carries for j in traj_of])
    res = run_packed(packed, graph_of, params, trajs, traj_of, state, carry, record_states=True, parallel=True)
    for s, j in enumerate(traj_of):
        c = convs[j]
        traj = run_trajectory(c.g, c.initial, c.signals, rules[s], initial_carries=c.carries, max_turns=c.max_turns)
        for t, (u, m) in enumerate(zip(traj.updates, traj.metrics)):
            assert not diff(counters_dict(res.counters[s, t]), expected_row(u, m)), (s, t)
            assert res.after_turn(s, t + 1) == (u.post, u.carries), (s, t)


def test_eta_uses_libm_pow_not_a_square():
    """x**2 in CPython is libm pow(x, 2.0), which differs from x*x for ~1 in 1000 doubles (and
    changes eta far more rarely); build a load where eta differs and check the kernel's eta equals
    the Python one (a kernel computing x*x fails here)."""
    g = random_index(random.Random(0), 20)  # tau = round(0.55 * 20) = 11 under the reference preset
    found, attempt = None, 0.0
    for k in range(1, 100000):  # the load the kernel will see: 11.0 + (0.05 + 0.05 + ...)
        attempt += 0.05
        x = ((11.0 + attempt) - 11) / (11 * 1.3)
        if 1 / (1 + x**2) != 1 / (1 + x * x):  # rare: the difference usually rounds away
            found = k
            break
    assert found is not None
    r = rules_from("reference", w_state=(1.0, 1.0, 1.0, 1.0), w_reasoning=(0.05, 0.05, 0.05, 0.05))
    entries = [SignalEntry(id=f"Q{i}", teaching_quality="shallow") for i in range(11)]  # unknown ids: 11 x 1.0
    entries += [SignalEntry(id=None, user_attempt_type="reasoning") for _ in range(found)]  # id-less: 0.05 each
    s = Session(g, r, {}, {}, [entries], 15)
    traj = python_trajectory(s)
    res = run_batch([g], [r], [{}], [[entries]], max_turns=[15])
    assert res.counter("eta")[0, 0] == traj.updates[0].eta
    assert res.counter("effective_load")[0, 0] == traj.updates[0].effective_load


def test_duplicated_id_across_the_hinge_boundary_takes_the_later_rank():
    """An IU mentioned twice whose two entries rank N-1 and N: the later (tail) efficiency wins."""
    nodes = [{"id": v} for v in ("Z", "A", "B", "C", "D", "E", "F")]  # |G| = 7: tau = 4, hinge N = 1
    g = build_index(IUGraph.model_validate({"nodes": nodes, "edges": [{"from": "Z", "to": "C"}]}))
    entries = [
        SignalEntry(id="A", teaching_quality="well_explained", user_attempt_type="reasoning"),
        SignalEntry(id="A", teaching_quality="well_explained"),
        SignalEntry(id="B", teaching_quality="shallow"),
    ]
    s = Session(g, reference_rules(), {"B": 3}, {}, [entries], 15)
    u = python_trajectory(s).updates[0]
    assert u.eta < 1 and u.carries["A"] == 0.5 * u.eta  # the rule itself: later rank (tail) wins
    assert_matches_python([s], parallel=False)


def test_reproduces_recorded_reference_traces(shared_ref):
    """The kernel replays the authors' recorded math conversations: states, carries and counters."""
    records = json.loads((shared_ref / "examples/mathqa_structured_adaptive_novice.json").read_text())
    graphs = json.loads((shared_ref / "iu_cache/math.json").read_text())
    rules = reference_rules()
    for record in records:
        pid = record["problem_id"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphWarning)
            g = build_index(check_graph(parse_graph(graphs[pid], pid), pid, "reference"))
        traj, view = replay_record(record, g, rules)
        initial, carries = initial_from_ks(g, record["initial_knowledge_state"])
        res = run_batch(
            [g], rules, [initial], [traj.entries], carries=[carries], max_turns=[int(record["turns"])], record_states=True
        )
        assert res.n_turns[0] == len(record["iu_analysis_history"]) == 15
        for t in range(1, 16):
            states, carr = res.after_turn(0, t)
            ks = record["knowledge_state_history"][t]
            for v, label in zip(g.ids, g.labels):
                assert STATE_NAMES[states[v]] == ks[label]["state"], (pid, t, v)
                assert carr[v] == pytest.approx(ks[label].get("fractional_progress", 0.0), abs=1e-12), (pid, t, v)
            assert (states, carr) == (traj.updates[t - 1].post, traj.updates[t - 1].carries)
            row = counters_dict(res.counters[0, t - 1])
            assert not diff(row, expected_row(traj.updates[t - 1], traj.metrics[t - 1]))
            rec = record["turn_metrics_history"][t - 1]
            assert bool(row["overload"]) == rec["overload"]
            for ours, theirs in [
                ("comprehension_load", "comprehension_load"),
                ("attempt_load", "attempt_load"),
                ("effective_load", "effective_load"),
                ("n_upward_transitions", "n_upward_transitions"),
                ("absorbed_gain", "absorbed_gain"),
                ("ic_numerator", "ic_numerator"),
                ("ic_denominator", "ic_denominator"),
                ("zpd_size", "zpd_size"),
                ("perceived_overload", "perceived_overload_turn"),
                ("familiarity", "familiarity_term"),
                ("novelty", "novelty_term"),
                ("engagement", "engagement"),
            ]:
                assert row[ours] == pytest.approx(rec[theirs], abs=1e-9), (pid, t, ours)
        assert view["knowledge_state_history"][-1] is not None
