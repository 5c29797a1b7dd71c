"""ray_knowsim/identity_memo.py (a rank-0 helper; its users are schema/outputs' shared JSON and
prompts/views' per-graph caches): found again by identity only, never by an equal object; the
holder is kept; the bound evicts the oldest; a value made once."""

from __future__ import annotations

from ray_knowsim.identity_memo import IdentityMemo


def test_found_by_identity_not_by_equality():
    memo = IdentityMemo(8)
    a, b = {"x": 1}, {"x": 1}
    memo.put(a, "A")
    assert memo.get(a) == "A"
    assert memo.get(b) is None and memo.get(b, "none") == "none"


def test_the_holder_is_kept_so_its_id_stays_its_own():
    memo = IdentityMemo(8)
    memo.put([1, 2], "list")  # no other reference: only the memo keeps it alive
    (held, value), = memo._entries.values()
    assert held == [1, 2] and value == "list"


def test_past_the_limit_the_oldest_leaves_first_and_a_replaced_entry_evicts_nothing():
    memo = IdentityMemo(2)
    a, b, c = object(), object(), object()
    memo.put(a, 1)
    memo.put(b, 2)
    memo.put(b, 3)  # already there: nothing leaves
    assert len(memo) == 2 and memo.get(a) == 1 and memo.get(b) == 3
    memo.put(c, 4)
    assert memo.get(a) is None and memo.get(b) == 3 and memo.get(c) == 4


def test_get_or_make_makes_once_even_for_a_falsy_value():
    memo = IdentityMemo(4)
    calls = []
    key = object()

    def make(obj):
        calls.append(obj)
        return {}

    first = memo.get_or_make(key, make)
    assert memo.get_or_make(key, make) is first and calls == [key]
