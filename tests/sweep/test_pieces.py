"""The piece layout (pure): settings ranges per block, what is left, cutting it for a cluster, and
which commit supplies each setting when commits overlap."""

from __future__ import annotations

import random

import pytest

from ray_knowsim.sweep.pieces import PIECES_PER_CPU, Piece, assign, cut, missing, settings_per_piece, subtract, union


def settings_of(ranges) -> list[int]:
    return [s for a, b in ranges for s in range(a, b)]


def test_ranges_merge_and_subtract():
    assert union([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == [(0, 3), (5, 9)]
    assert subtract([(0, 10)], [(2, 4), (3, 5), (8, 12)]) == [(0, 2), (5, 8)]
    assert subtract([(0, 3), (5, 9)], [(0, 9)]) == []
    rng = random.Random(0)
    for _ in range(200):
        a = [tuple(sorted(rng.sample(range(30), 2))) for _ in range(rng.randint(0, 4))]
        b = [tuple(sorted(rng.sample(range(30), 2))) for _ in range(rng.randint(0, 4))]
        assert set(settings_of(subtract(a, b))) == set(settings_of(a)) - set(settings_of(b))
        assert settings_of(union(a)) == sorted(set(settings_of(a)))


def test_missing_is_the_complement_of_what_is_covered():
    left = missing(10, 3, {0: [(0, 10)], 1: [(0, 4), (6, 8)]})
    assert left == {1: [(4, 6), (8, 10)], 2: [(0, 10)]}


def test_cut_covers_exactly_the_work_left_in_near_equal_pieces_block_major():
    todo = {2: [(0, 10)], 0: [(3, 4), (7, 30)]}
    pieces = cut(todo, 6)
    assert [p.block for p in pieces] == sorted(p.block for p in pieces)
    for block, ranges in todo.items():
        got = [s for p in pieces if p.block == block for s in range(p.start, p.stop)]
        assert got == settings_of(ranges)
    assert all(1 <= p.n_settings <= 6 for p in pieces)
    assert sorted(p.n_settings for p in pieces if p.block == 0 and p.start >= 7) == [5, 6, 6, 6]  # 23 in 4, not 6+6+6+5
    assert Piece(1, 20, 30).name == "b00001-s0000020-0000030"


def test_pieces_are_sized_from_the_cluster_and_capped_by_time():
    todo = missing(1000, 2, {})  # 1,000 settings x 2 blocks of 1,000 conversations
    common = dict(todo=todo, block_size=1000, seconds_per_pair=3e-5, target_task_seconds=3.0)
    on_2 = settings_per_piece(cpus=2, **common)
    on_64 = settings_per_piece(cpus=64, **common)
    assert 90 <= on_2 and on_2 * 1000 * 3e-5 <= 3.0  # about 3 s of work at 30 us per pair, not more
    assert len(cut(todo, on_64)) > (PIECES_PER_CPU - 1) * 64 > len(cut(todo, on_2)) >= 2 * PIECES_PER_CPU
    assert settings_per_piece(cpus=64, explicit=7, **common) == 7
    # what is left decides, not the sweep's size: a resume with little work left still spreads it
    nearly_done = missing(1000, 2, {0: [(0, 1000)], 1: [(0, 960)]})
    assert len(cut(nearly_done, settings_per_piece(**common | {"todo": nearly_done, "cpus": 8}))) >= 2 * 8


def test_overlapping_commits_supply_every_setting_exactly_once():
    claims = [("a", 0, (0, 4)), ("b", 0, (2, 6)), ("c", 0, (0, 4)), ("d", 1, (0, 3)), ("e", 0, (6, 8))]
    got = assign(claims)
    assert got == {"a": [(0, 4)], "c": [], "b": [(4, 6)], "d": [(0, 3)], "e": [(6, 8)]}
    rng = random.Random(1)
    for _ in range(100):
        claims = []
        for k in range(rng.randint(1, 8)):
            a = rng.randrange(20)
            claims.append((f"m{k}", rng.randrange(2), (a, a + rng.randint(1, 8))))
        supply = assign(claims)
        for block in (0, 1):
            mine = [s for name, b, _ in claims if b == block for s in settings_of(supply[name])]
            assert sorted(mine) == sorted(set(settings_of([r for _, b, r in claims if b == block])))
        for name, _, (a, b) in claims:
            assert all(a <= s < b for s in settings_of(supply[name]))


@pytest.mark.parametrize("per_piece", [1, 3, 1000])
def test_cut_then_missing_leaves_nothing(per_piece):
    todo = missing(17, 4, {1: [(3, 9)]})
    covered: dict[int, list] = {1: [(3, 9)]}
    for p in cut(todo, per_piece):
        covered.setdefault(p.block, []).append((p.start, p.stop))
    assert missing(17, 4, covered) == {}
