"""Initial-state sampler (spec §4): reproduction of the shipped cache, and properties on random graphs."""

from __future__ import annotations

import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_knowsim.io.loaders import load_graph_cache, load_init_cache, load_items, load_records
from ray_knowsim.schema.graph import GraphWarning, IUGraph, build_index
from ray_knowsim.schema.items import INIT_CACHE_TASK_KEYS, Item
from ray_knowsim.schema.knowledge import InitCache
from ray_knowsim.schema.states import KNOWLEDGE_LEVELS, KNOWS_WELL, PARTIAL, STRUGGLING, UNAWARE
from ray_knowsim.rules.config import InitRatios, paper_rules, reference_rules, rules_from
from ray_knowsim.rules.init_state import (
    initial_state_for,
    kahn_order,
    known_target,
    ks_to_states,
    partial_target,
    placement_states,
    sample_initial_states,
    sample_placement,
    states_to_ks,
    struggling_target,
)

REF = reference_rules()
PAPER = paper_rules()


def make_index(n: int, edges: list[tuple[int, int]], order: list[int] | None = None, item_id: str = "x"):
    """Graph with nodes IU1..IUn (listed in ``order``) and edges (from, to) given as numbers."""
    order = order or list(range(1, n + 1))
    graph = IUGraph.model_validate(
        {
            "nodes": [{"id": f"IU{k}", "concept": f"c{k}"} for k in order],
            "edges": [{"from": f"IU{a}", "to": f"IU{b}"} for a, b in edges],
        }
    )
    return build_index(graph, item_id)


@st.composite
def dags(draw, max_n: int = 18):
    n = draw(st.integers(1, max_n))
    rank = draw(st.permutations(range(1, n + 1)))  # a hidden topological order
    pairs = [(rank[i], rank[j]) for i in range(n) for j in range(i + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=3 * n)) if pairs else []  # duplicates allowed
    order = draw(st.permutations(range(1, n + 1)))
    return make_index(n, edges, list(order))


@st.composite
def digraphs(draw, max_n: int = 14):
    """Any directed graph: cycles, self-loops, duplicate edges."""
    n = draw(st.integers(1, max_n))
    ends = st.integers(1, n)
    edges = draw(st.lists(st.tuples(ends, ends), max_size=3 * n))
    return make_index(n, edges, list(draw(st.permutations(range(1, n + 1)))))


def closed(index, states) -> bool:
    return all(all(states.get(p) == KNOWS_WELL for p in index.prereqs[v]) for v, s in states.items() if s == KNOWS_WELL)


# ---------------------------------------------------------------------------------------------
# reproduction of data/init_ks_cache.json (spec §4.6)


def _reproduced(shared_ref) -> dict[str, int]:
    cache = load_init_cache(shared_ref / "init_ks_cache.json")
    hits: dict[str, int] = {}
    for task in ("math", "expertqa"):
        items = load_items(shared_ref / "paper_subset" / f"{task}.jsonl")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphWarning)
            graphs = load_graph_cache(shared_ref / "iu_cache" / f"{task}.json", mode="reference")
        groups = {
            "validation": [it for it in items if "validation" in it.splits],
            "benchmarking_only": [it for it in items if "validation" not in it.splits],
        }
        for group, group_items in groups.items():
            hits[f"{task}/{group}"] = 0
            for level in KNOWLEDGE_LEVELS:
                rng = random.Random(42)  # one stream per (task, level, run), items in file order
                for it in group_items:
                    index = build_index(graphs[it.id], it.id)
                    ks = states_to_ks(index, sample_initial_states(index, level, REF, rng))
                    hits[f"{task}/{group}"] += ks == cache.lookup(INIT_CACHE_TASK_KEYS[task], it.id, level)
    return hits


def test_seed42_streams_reproduce_152_cache_entries(shared_ref):
    hits = _reproduced(shared_ref)
    assert hits == {
        "math/validation": 17,
        "math/benchmarking_only": 45,
        "expertqa/validation": 60,
        "expertqa/benchmarking_only": 30,
    }
    assert sum(hits.values()) == 152


def test_iu_cache_lists_each_group_in_item_file_order(shared_ref):
    """Why item-file and IU-cache order reproduce equally: within each group the orders agree."""
    for task in ("math", "expertqa"):
        items = load_items(shared_ref / "paper_subset" / f"{task}.jsonl")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphWarning)
            cache_order = list(load_graph_cache(shared_ref / "iu_cache" / f"{task}.json", mode="reference"))
        val = [it.id for it in items if "validation" in it.splits]
        rest = [it.id for it in items if "validation" not in it.splits]
        assert cache_order == val + rest


def test_one_stream_over_all_items_does_not_reproduce(shared_ref):
    """The benchmarking run drew only the uncached items: one stream over all 30 is the wrong model."""
    cache = load_init_cache(shared_ref / "init_ks_cache.json")
    items = load_items(shared_ref / "paper_subset" / "math.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphWarning)
        graphs = load_graph_cache(shared_ref / "iu_cache" / "math.json", mode="reference")
    hits = 0
    for level in KNOWLEDGE_LEVELS:
        rng = random.Random(42)
        for it in items:
            index = build_index(graphs[it.id], it.id)
            hits += states_to_ks(index, sample_initial_states(index, level, REF, rng)) == cache.lookup("competition_math", it.id, level)
    assert hits < 17 + 45


def test_example_records_start_from_the_sampled_and_cached_state(shared_ref):
    cache = load_init_cache(shared_ref / "init_ks_cache.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphWarning)
        graphs = load_graph_cache(shared_ref / "iu_cache" / "math.json", mode="reference")
    records = load_records(shared_ref / "examples" / "mathqa_structured_adaptive_novice.json")
    rng = random.Random(42)  # math_003, math_004 are the first two validation items
    for rec in records:
        index = build_index(graphs[rec.problem_id], rec.problem_id)
        sampled = states_to_ks(index, sample_initial_states(index, "novice", REF, rng))
        assert rec.initial_knowledge_state == sampled == cache.lookup("competition_math", rec.problem_id, "novice")


def test_all_cache_entries_are_prerequisite_closed(shared_ref):
    cache = load_init_cache(shared_ref / "init_ks_cache.json")
    for task in ("math", "expertqa"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GraphWarning)
            graphs = load_graph_cache(shared_ref / "iu_cache" / f"{task}.json", mode="reference")
        for item_id, graph in graphs.items():
            index = build_index(graph, item_id)
            for level in KNOWLEDGE_LEVELS:
                ks = cache.lookup(INIT_CACHE_TASK_KEYS[task], item_id, level)
                assert set(ks) == set(index.labels)
                assert closed(index, ks_to_states(index, ks))


# ---------------------------------------------------------------------------------------------
# the reference procedure on hand-made graphs


def test_target_counts_match_spec_table():
    table = {  # n: (novice K/P/S, intermediate K/P/S, advanced K/P/S), spec §4.3 (K reached exactly)
        9: ((1, 1, 3), (5, 2, 2), (7, 1, 1)),
        10: ((1, 1, 3), (6, 2, 2), (8, 1, 1)),
        11: ((1, 1, 3), (6, 3, 2), (9, 1, 1)),
        12: ((1, 1, 4), (7, 3, 2), (10, 1, 1)),
        13: ((1, 1, 4), (7, 3, 3), (10, 2, 1)),
        14: ((1, 1, 4), (8, 4, 3), (11, 2, 1)),
        15: ((2, 2, 4), (8, 4, 3), (12, 2, 2)),
        16: ((2, 2, 5), (9, 4, 3), (13, 2, 2)),
        17: ((2, 2, 5), (9, 4, 3), (14, 2, 2)),
        18: ((2, 2, 5), (10, 4, 4), (14, 3, 2)),
        19: ((2, 2, 6), (10, 5, 4), (15, 3, 2)),
        20: ((2, 2, 6), (11, 5, 4), (16, 3, 2)),
        24: ((2, 2, 7), (13, 6, 5), (19, 4, 2)),
    }
    for n, per_level in table.items():
        for level, (k, p, s) in zip(KNOWLEDGE_LEVELS, per_level):
            r = REF.init_ratios[level]
            assert (known_target(n, r), partial_target(n, known_target(n, r), r), struggling_target(n, r)) == (k, p, s), (n, level)


@pytest.mark.parametrize("level", KNOWLEDGE_LEVELS)
@pytest.mark.parametrize("n", [2, 5, 9, 13, 24])
def test_realised_counts_on_edgeless_graph(n, level):
    """Every node is a root, so every target is met; partial roots are demoted to struggling (D3)."""
    index = make_index(n, [])
    r = REF.init_ratios[level]
    k, p, s = known_target(n, r), partial_target(n, known_target(n, r), r), struggling_target(n, r)
    placed = sample_placement(index, level, REF, random.Random(7))
    assert (len(placed.known), len(placed.partial), len(placed.band)) == (k, p, min(s, n - k - p))
    states = list(sample_initial_states(index, level, REF, random.Random(7)).values())
    assert states.count(KNOWS_WELL) == k and states.count(PARTIAL) == 0
    assert states.count(STRUGGLING) == p + min(s, n - k - p)
    undemoted = list(placement_states(index, level, placed, demotion=False).values())
    assert undemoted.count(PARTIAL) == p


def test_partial_needs_a_known_prerequisite_and_half_known_to_stay_partial():
    # IU1 -> IU3, IU2 -> IU3 ; IU1 -> IU4 ; IU5 isolated root
    index = make_index(5, [(1, 3), (2, 3), (1, 4)])
    for seed in range(200):
        placed = sample_placement(index, "intermediate", REF, random.Random(seed))
        states = placement_states(index, "intermediate", placed)
        for v in placed.partial:
            ps = index.prereqs[v]
            assert not ps or any(p in placed.known for p in ps)
            share = sum(p in placed.known for p in ps) / max(len(ps), 1)
            assert states[v] == (PARTIAL if share >= 0.5 else STRUGGLING)


def test_kahn_order_ties_fifo_and_cycles_last():
    # node order IU3, IU1, IU2, IU4, IU5; IU3 -> IU2, IU1 -> IU2 ; IU4 <-> IU5 cycle
    index = make_index(5, [(3, 2), (1, 2), (4, 5), (5, 4)], order=[3, 1, 2, 4, 5])
    assert kahn_order(index) == (["IU3", "IU1", "IU2", "IU4", "IU5"], 3)
    dup = make_index(3, [(1, 3), (1, 3), (2, 3)])  # duplicate edge counted twice, decremented twice
    assert kahn_order(dup) == (["IU1", "IU2", "IU3"], 3)


def test_dangling_prerequisite_reads_as_unaware():
    """Reference mode keeps edges from unknown ids: such an IU can never be known."""
    graph = IUGraph.model_validate({"nodes": [{"id": "IU1"}, {"id": "IU2"}], "edges": [{"from": "IU9", "to": "IU2"}]})
    index = build_index(graph, "d")
    for seed in range(50):
        for level in KNOWLEDGE_LEVELS:
            assert sample_initial_states(index, level, REF, random.Random(seed))["IU2"] != KNOWS_WELL


def test_rootless_novice_gets_smallest_unaware_id_as_partial():
    index = make_index(12, [(k, k % 12 + 1) for k in range(1, 13)])  # one big cycle, no root
    states = sample_initial_states(index, "novice", REF, random.Random(3))
    assert list(states.values()).count(KNOWS_WELL) == 0
    assert [v for v, s in states.items() if s == PARTIAL] == [min(v for v, s in states.items() if s in (UNAWARE, PARTIAL))]
    # not for the other levels
    other = sample_initial_states(index, "advanced", REF, random.Random(3))
    assert PARTIAL not in other.values()


def test_struggling_band_shuffles_always_consume_the_stream():
    """Both band shuffles happen even when S = 0 (they move the shared stream)."""
    # IU1 is the only root; IU2-IU4 (and IU6 if IU2 is partial) are exposed; IU7, IU8 are isolated
    index = make_index(8, [(1, 2), (1, 3), (1, 4), (1, 5), (2, 6), (6, 7), (6, 8)])
    zero_band = rules_from("reference", init_ratios={**REF.init_ratios, "novice": InitRatios(known=0.1, partial=0.1, struggling=0.0)})
    for seed in range(20):
        a, b, skipped = random.Random(seed), random.Random(seed), random.Random(seed)
        states = sample_initial_states(index, "novice", zero_band, a)
        assert STRUGGLING not in (states[v] for v in ("IU6", "IU7", "IU8"))
        sample_initial_states(index, "novice", REF, b)
        assert a.getstate() == b.getstate()
        sample_placement(index, "novice", rules_from("reference", include_struggling=False), skipped)
        assert skipped.getstate() != a.getstate()  # without the band there is nothing to shuffle


# ---------------------------------------------------------------------------------------------
# properties on random graphs


@settings(max_examples=150, deadline=None)
@given(index=dags(), seed=st.integers(0, 2**32 - 1), level=st.sampled_from(KNOWLEDGE_LEVELS))
def test_reference_on_dags_is_closed_and_meets_known_target(index, seed, level):
    placed = sample_placement(index, level, REF, random.Random(seed))
    states = sample_initial_states(index, level, REF, random.Random(seed))
    n, r = index.size, REF.init_ratios[level]
    assert list(states) == list(index.ids)
    assert closed(index, states)
    assert len(placed.known) == known_target(n, r)  # a DAG always offers an admissible node
    assert len(placed.partial) <= partial_target(n, len(placed.known), r)
    rest = n - len(placed.known) - len(placed.partial)
    assert len(placed.band) == min(struggling_target(n, r), rest)
    assert not (placed.known & placed.partial or placed.known & placed.band or placed.partial & placed.band)
    for v, s in states.items():
        if s == PARTIAL:  # only partial IUs with >= half their prerequisites known survive D3
            ps = index.prereqs[v]
            assert ps and sum(p in placed.known for p in ps) / len(ps) >= 0.5


@settings(max_examples=100, deadline=None)
@given(index=digraphs(), seed=st.integers(0, 2**32 - 1), level=st.sampled_from(KNOWLEDGE_LEVELS), paper=st.booleans())
def test_deterministic_per_seed(index, seed, level, paper):
    rules = PAPER if paper else REF
    a, b = random.Random(seed), random.Random(seed)
    first = sample_initial_states(index, level, rules, a)
    assert sample_initial_states(index, level, rules, b) == first
    assert a.getstate() == b.getstate()
    assert set(first.values()) <= {UNAWARE, STRUGGLING, PARTIAL, KNOWS_WELL}


@settings(max_examples=150, deadline=None)
@given(index=digraphs(), seed=st.integers(0, 2**32 - 1), level=st.sampled_from(KNOWLEDGE_LEVELS))
def test_cycles_are_tolerated_and_known_stays_closed(index, seed, level):
    for rules in (REF, PAPER):
        states = sample_initial_states(index, level, rules, random.Random(seed))
        assert list(states) == list(index.ids)
        assert closed(index, states)  # nodes on or below a cycle can never be known
        _, reached = kahn_order(index)
        assert list(states.values()).count(KNOWS_WELL) <= reached


@settings(max_examples=150, deadline=None)
@given(index=dags(), seed=st.integers(0, 2**32 - 1), level=st.sampled_from(KNOWLEDGE_LEVELS))
def test_paper_preset_is_monotone_along_edges(index, seed, level):
    """Topological placement: a prerequisite never holds a lower state than its dependant."""
    states = sample_initial_states(index, level, PAPER, random.Random(seed))
    for a, b in index.edges:
        assert states[a] >= states[b], (a, b, states)
    n, r = index.size, PAPER.init_ratios[level]
    k = known_target(n, r)
    p = partial_target(n, k, r)
    values = list(states.values())
    assert values.count(KNOWS_WELL) == k
    assert values.count(PARTIAL) == min(p, n - k)  # no demotion in the paper preset
    assert values.count(STRUGGLING) == min(struggling_target(n, r), n - k - min(p, n - k))


def test_paper_preset_uses_the_paper_partial_ratio():
    index = make_index(20, [(k, k + 1) for k in range(1, 20, 2)])
    ref = sample_initial_states(index, "intermediate", REF, random.Random(1))
    pap = sample_initial_states(index, "intermediate", PAPER, random.Random(1))
    assert list(pap.values()).count(PARTIAL) == 3  # round(0.15 * 20): D1 paper table
    assert list(ref.values()).count(KNOWS_WELL) == list(pap.values()).count(KNOWS_WELL) == 11


# ---------------------------------------------------------------------------------------------
# cache use (spec §4.1)


def _item(item_id: str = "math_900", task: str = "math") -> Item:
    return Item(id=item_id, task=task, question="q")


def test_cached_state_is_used_verbatim_without_consuming_the_stream():
    index = make_index(4, [(1, 2)])
    cached_ks = {"IU1: c1": {"state": "knows_well"}, "IU2: c2": {"state": "weird"}, "IU4: c4": {"state": "unaware"}}
    cache = InitCache.model_validate({"_meta": {}, "competition_math": {"math_900": {"novice": cached_ks}}})
    rng = random.Random(11)
    before = rng.getstate()
    got = initial_state_for(_item(), "novice", index, REF, rng, init_cache=cache)
    assert got == cached_ks and got is not cache.lookup("competition_math", "math_900", "novice")
    assert rng.getstate() == before
    # a miss (other level, other task key) samples and consumes the stream
    twin = random.Random(11)
    missed = initial_state_for(_item(), "advanced", index, REF, rng, init_cache=cache)
    assert missed == states_to_ks(index, sample_initial_states(index, "advanced", REF, twin))
    assert rng.getstate() == twin.getstate() != before
    other_task = random.Random(11)
    initial_state_for(_item("math_900", "expertqa"), "novice", index, REF, other_task, init_cache=cache)
    assert other_task.getstate() != before


def test_ks_round_trip_uses_labels():
    index = make_index(3, [(1, 2), (2, 3)])
    states = {"IU1": KNOWS_WELL, "IU2": PARTIAL, "IU3": UNAWARE}
    ks = states_to_ks(index, states)
    assert ks == {"IU1: c1": {"state": "knows_well"}, "IU2: c2": {"state": "partial_understanding"}, "IU3: c3": {"state": "unaware"}}
    assert ks_to_states(index, ks) == states
    assert ks_to_states(index, {}) == {"IU1": UNAWARE, "IU2": UNAWARE, "IU3": UNAWARE}
