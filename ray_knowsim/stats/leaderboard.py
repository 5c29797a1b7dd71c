"""One metric's leaderboard from its pairwise verdicts (pure): the order, the positions and the star.

Verdicts are on the item win rate (:mod:`.signs`; an adaptive run's sequential verdicts are on
the same quantity), so the leaderboard is too:

* conditions are ordered by their **mean item rank** (:func:`ray_knowsim.stats.ranks.mean_item_ranks`,
  the Borda count of the pairwise win rates: smaller is better), EXCEPT that the order never
  places a pair against its own significant verdict: the order is a topological order of the
  significant "i beats j" verdicts, ties in it broken by mean item rank (then the given order);
* a **cycle** among significant verdicts (A beats B, B beats C, C beats A) cannot be ordered: its
  members share one position (the smallest they would take) and the cycle is named, so no strict
  order is claimed between them;
* the **star** goes only to a condition that significantly beats EVERY other condition directly
  (not "nobody beat it": with three conditions, "best" by elimination can be beaten by another).

Why not a bootstrap P(best): a share of replicates is not a probability that a condition is
best, and it is computed on means, not on the quantity verdicts test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ray_knowsim.stats.ranks import TIE_DECIMALS, mean_item_ranks

Pair = tuple[str, str]


@dataclass(frozen=True)
class Board:
    order: list[str]  # best first; members of a cycle are adjacent
    position: dict[str, int]  # 1 = first; the members of a cycle share the smallest position of the block
    mean_item_rank: dict[str, float]
    beats: dict[str, list[str]]  # condition -> the conditions it significantly beats
    star: str | None  # significantly beats every other condition; None otherwise
    cycles: list[list[str]]  # each a set of conditions whose significant verdicts form a cycle (in order)

    @property
    def strict(self) -> bool:
        """True when the order claims nothing a cycle contradicts."""
        return not self.cycles


def _components(nodes: Sequence[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), each in ``nodes`` order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ()), key=nodes.index):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp, key=nodes.index))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def _cycle_order(comp: list[str], edges: Mapping[str, set[str]]) -> list[str]:
    """A directed cycle through the component's first member, for naming it (A > B > C > A)."""
    start = comp[0]
    members = set(comp)
    path, seen = [start], {start}

    def walk(v: str) -> bool:
        for w in sorted(edges.get(v, ()) & members, key=comp.index):
            if w == start and len(path) > 1:
                return True
            if w not in seen:
                seen.add(w)
                path.append(w)
                if walk(w):
                    return True
                path.pop()
        return False

    walk(start)
    return path


def board(conditions: Sequence[str], win_rate: Mapping[Pair, float], beats: Sequence[Pair]) -> Board:
    """The leaderboard of one metric: ``win_rate[(i, j)]`` = theta_ij (share of matched items i
    wins over j, ties half; either order of a pair), ``beats`` the significant verdicts as
    (winner, loser)."""
    conds = list(conditions)
    mir = mean_item_ranks(conds, win_rate)
    edges: dict[str, set[str]] = {c: set() for c in conds}
    for w, l in beats:
        if w in edges and l in edges and w != l:
            edges[w].add(l)
    comps = _components(conds, edges)
    comp_of = {c: k for k, comp in enumerate(comps) for c in comp}
    key = {k: min((round(mir[c], TIE_DECIMALS), conds.index(c)) for c in comp) for k, comp in enumerate(comps)}
    # Kahn's algorithm on the condensation: among the components nobody remaining beats, the best mean item rank first
    into = {k: {comp_of[w] for w in conds if comp_of[w] != k and any(comp_of[l] == k for l in edges[w])} for k in range(len(comps))}
    order: list[str] = []
    position: dict[str, int] = {}
    done: set[int] = set()
    while len(done) < len(comps):
        ready = [k for k in range(len(comps)) if k not in done and not (into[k] - done)]
        k = min(ready, key=key.get)
        done.add(k)
        members = sorted(comps[k], key=lambda c: (round(mir[c], TIE_DECIMALS), conds.index(c)))
        pos = len(order) + 1
        for c in members:
            position[c] = pos
        order += members
    # conditions tied in mean item rank and unordered by any verdict share a position
    for i in range(1, len(order)):
        a, b = order[i - 1], order[i]
        if (comp_of[a] != comp_of[b] and round(mir[a], TIE_DECIMALS) == round(mir[b], TIE_DECIMALS)
                and b not in edges[a] and position[b] != position[a] and len(comps[comp_of[b]]) == 1 and len(comps[comp_of[a]]) == 1):
            position[b] = position[a]
    cycles = [_cycle_order(comp, edges) for comp in comps if len(comp) > 1]
    star = next((c for c in conds if len(conds) > 1 and edges[c] == set(conds) - {c}), None)
    return Board(order, position, mir, {c: sorted(edges[c], key=conds.index) for c in conds}, star, cycles)


def contradicts(order: Sequence[str], beats: Sequence[Pair]) -> list[Pair]:
    """The significant verdicts an order places the wrong way round (empty for a board's order
    without cycles): a check for tests and for any table that sorts conditions."""
    pos = {c: k for k, c in enumerate(order)}
    return [(w, l) for w, l in beats if w in pos and l in pos and pos[w] > pos[l]]


__all__ = ["Board", "Pair", "board", "contradicts"]
