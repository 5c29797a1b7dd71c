"""One metric's leaderboard from its pairwise verdicts (pure): tiers, the descriptive order within
them, the star, and the smallest effect the run could have detected.

Verdicts are on the item win rate (:mod:`.signs`; an adaptive run's sequential verdicts are on
the same quantity), so the leaderboard is too, and its positions are **tiers from the verdicts**
(issue 49):

* a condition's **tier** is 1 + the length of the longest chain of significant defeats above it
  (:func:`_tiers`). So a condition is below every condition that significantly beats it, a tier
  never holds a winner together with its loser, and conditions nobody beats share tier 1 whatever
  their means. Under A/A (no verdict) everyone shares tier 1; a total order of verdicts gives
  distinct tiers. Why not "order by mean item rank, share a position with a tied neighbour" (the
  old rule): sharing pairwise along an order chains (a ~ b ~ c put a and c together although a
  beats c), and an order of means with no verdict behind a step reads as a ranking;
* a **cycle** among significant verdicts (A beats B, B beats C, C beats A) cannot be layered: its
  members share one tier and the cycle is named, so no order is claimed between them;
* the **mean item rank** (:func:`ray_knowsim.stats.ranks.mean_item_ranks`, the Borda count of the
  pairwise win rates: smaller is better) only orders the rows within a tier, and is shown as
  description, never as a position;
* a **step** with no verdict behind it (two conditions in one tier, or in adjacent tiers without a
  significant verdict between them) is marked "n.s." (:func:`board_line`, :func:`tier_note`), and
  the run's smallest detectable win rate (:class:`Detectable`) is said beside every order, so
  "no verdict" is read against what the run could have found;
* the **star** goes only to a condition that significantly beats EVERY other condition directly
  (not "nobody beat it": with three conditions, "best" by elimination can be beaten by another).

Why not a bootstrap P(best): a share of replicates is not a probability that a condition is
best, and it is computed on means, not on the quantity verdicts test.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Mapping, Sequence

from ray_knowsim.stats.defaults import POWER
from ray_knowsim.stats.ranks import TIE_DECIMALS, mean_item_ranks
from ray_knowsim.stats.signs import mde_win_rate

Pair = tuple[str, str]


#: how a board's positions are made, in the words every surface that shows one uses (the report's
#: results tables and notes, compare's page and compare.json)
TIER_RULE = ("each condition's tier is 1 + the longest chain of significant defeats above it, so conditions no verdict "
             "separates share a tier and a cycle of verdicts shares one and is named; rows inside a tier follow the mean "
             "item rank (description); ★ = significantly beats every other condition")


@dataclass(frozen=True)
class Detectable:
    """The smallest win rate a run's family could detect: a board states it beside its order, so
    a step marked n.s. reads as "not found at this size", never as "equal"."""

    n_items: int  # matched items of the board's pairs (the most any pair has)
    alpha: float
    family_size: int  # the verdicts' family: the first Holm step tests at alpha / family_size
    power: float = POWER

    @property
    def win_rate(self) -> float:
        """:func:`ray_knowsim.stats.signs.mde_win_rate` at the family's first step, assuming no
        ties (NaN when no outcome of n items can be significant)."""
        return mde_win_rate(int(self.n_items), self.alpha / max(1, int(self.family_size)), self.power)

    def text(self) -> str:
        """One sentence for every surface that shows an order."""
        q = self.win_rate
        where = f"{self.n_items} items, alpha {self.alpha:g} over a family of {self.family_size}"
        if math.isnan(q):
            return (f"Smallest detectable effect: none -- no outcome of {where} can be significant, so no tier "
                    "step can have a verdict behind it.")
        return (f"Smallest detectable effect: a win rate of {q:.3f} ({where}, power {self.power:g}, no ties; ties "
                "raise it). Conditions in one tier, and steps marked n.s., have no verdict between them: "
                "smaller differences may exist.")


@dataclass(frozen=True)
class Board:
    order: list[str]  # by tier, then (description only) by mean item rank; members of a cycle are adjacent
    tier: dict[str, int]  # 1 = top: 1 + the longest chain of significant defeats above the condition
    mean_item_rank: dict[str, float]  # descriptive
    beats: dict[str, list[str]]  # condition -> the conditions it significantly beats
    star: str | None  # significantly beats every other condition; None otherwise
    cycles: list[list[str]]  # each a set of conditions whose significant verdicts form a cycle (in order)
    detectable: Detectable | None = None  # the run's smallest detectable effect, when the caller knows it

    @property
    def position(self) -> dict[str, int]:
        """The tier, under the name the results tables and compare's CSV give it."""
        return self.tier

    @property
    def strict(self) -> bool:
        """True when the order claims nothing a cycle contradicts."""
        return not self.cycles

    def groups(self) -> list[list[str]]:
        """The conditions per tier, top first, each in the board's order."""
        out: dict[int, list[str]] = {}
        for c in self.order:
            out.setdefault(self.tier[c], []).append(c)
        return [out[t] for t in sorted(out)]


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


def _path(a: str, b: str, members: list[str], edges: Mapping[str, set[str]]) -> list[str]:
    """A shortest path a -> b inside ``members`` (breadth first), a excluded, b included."""
    prev: dict[str, str] = {a: a}
    frontier = [a]
    while b not in prev and frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ()) & set(members), key=members.index):
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    out, v = [], b
    while v != a:
        out.append(v)
        v = prev[v]
    return out[::-1]


def _cycle_order(comp: list[str], edges: Mapping[str, set[str]]) -> list[str]:
    """A closed walk through EVERY member of a strongly connected component, for naming it
    (A > B > C > A; with four members perhaps A > B > C > A > D, closing back on A). Why every
    member: they all share one tier, so each must be seen to be in the cycle."""
    walk = [comp[0]]
    for target in [*comp[1:], comp[0]]:
        if target in walk and target != comp[0]:
            continue
        walk += _path(walk[-1], target, comp, edges)
    return walk[:-1]  # the walk ends back on its start, which the namers close with cy[0]


def _tiers(comps: list[list[str]], edges: Mapping[str, set[str]]) -> dict[int, int]:
    """Each component's tier: 1 + the longest chain of significant defeats above it (longest-path
    layering of the condensation). Why this rule: a loser always lands below every condition that
    significantly beats it (a tier never holds a winner and its loser), while a condition nobody
    beats is tier 1 however its means look, so no tier boundary exists without a verdict under it."""
    comp_of = {c: k for k, comp in enumerate(comps) for c in comp}
    above = {k: {comp_of[w] for w in edges for l in edges[w] if comp_of[l] == k and comp_of[w] != k} for k in range(len(comps))}
    tier: dict[int, int] = {}
    while len(tier) < len(comps):  # the condensation is acyclic: some component always has every beater tiered
        for k in range(len(comps)):
            if k not in tier and above[k] <= tier.keys():
                tier[k] = 1 + max((tier[j] for j in above[k]), default=0)
    return tier


def board(conditions: Sequence[str], win_rate: Mapping[Pair, float], beats: Sequence[Pair],
          detectable: Detectable | None = None) -> Board:
    """The leaderboard of one metric: ``win_rate[(i, j)]`` = theta_ij (share of matched items i
    wins over j, ties half; either order of a pair), ``beats`` the significant verdicts as
    (winner, loser), ``detectable`` the run's smallest detectable win rate (said beside the order).
    Tiers come from the verdicts alone (:func:`_tiers`); the mean item rank only orders the rows
    within a tier, as description."""
    conds = list(conditions)
    mir = mean_item_ranks(conds, win_rate)
    edges: dict[str, set[str]] = {c: set() for c in conds}
    for w, l in beats:
        if w in edges and l in edges and w != l:
            edges[w].add(l)
    comps = _components(conds, edges)
    comp_tier = _tiers(comps, edges)
    tier = {c: comp_tier[k] for k, comp in enumerate(comps) for c in comp}
    described = {c: (round(mir[c], TIE_DECIMALS), conds.index(c)) for c in conds}
    comp_key = {c: min(described[m] for m in comp) for comp in comps for c in comp}  # a cycle's members stay adjacent
    order = sorted(conds, key=lambda c: (tier[c], comp_key[c], described[c]))
    cycles = [_cycle_order(comp, edges) for comp in comps if len(comp) > 1]
    star = next((c for c in conds if len(conds) > 1 and edges[c] == set(conds) - {c}), None)
    return Board(order, tier, mir, {c: sorted(edges[c], key=conds.index) for c in conds}, star, cycles, detectable)


def _step(b: Board, condition: str) -> str:
    """Who significantly beats ``condition`` and which members of the tier just above do not (n.s.)."""
    t = b.tier[condition]
    beaten_by = [w for w in b.order if condition in b.beats[w] and b.tier[w] < t]  # a cycle is named, not stepped
    above = [w for w in b.order if b.tier[w] == t - 1 and w not in beaten_by]
    return "; ".join(p for p in (f"below {', '.join(beaten_by)}" if beaten_by else "",
                                 f"n.s. vs {', '.join(above)}" if above else "") if p)


def tier_note(b: Board, condition: str) -> str:
    """Why ``condition`` sits in its tier, for a cell beside it: who significantly beats it, the
    members of the tier above with no verdict against it (n.s.), its cycle. Empty in tier 1
    outside a cycle, where nothing is claimed."""
    cycle = next((f"cycle {' > '.join([*cy, cy[0]])}" for cy in b.cycles if condition in cy), "")
    return "; ".join(p for p in (_step(b, condition), cycle) if p)


def board_line(b: Board, decimals: int = 2) -> str:
    """The board as one line for a terminal or a table cell, e.g. ``tier 1: a, b (n.s. between them)
    > tier 2: c (below a; n.s. vs b) | mean item rank (descriptive): a 1.50, b 2.00, c 2.50``. Why a
    tier and not "1. a · 2. b": a numbered list reads as a ranking where no verdict stands, so
    every step without a verdict says n.s. here, and the numbers are labelled as description."""
    cells = []
    for members in b.groups():
        t = b.tier[members[0]]
        star = {c: " ★" if b.star == c else "" for c in members}
        text = ", ".join(c + star[c] for c in members)
        if len(members) > 1:
            cyc = [cy for cy in b.cycles if set(cy) <= set(members)]
            text += (f" (cycle {'; '.join(' > '.join([*cy, cy[0]]) for cy in cyc)}: no order among them)" if cyc
                     else " (n.s. between them)")
        steps = [f"{c}: {_step(b, c)}" for c in members if _step(b, c)]
        if steps:
            text += " [" + "; ".join(steps) + "]"
        cells.append(f"tier {t}: {text}")
    desc = ", ".join(f"{c} {b.mean_item_rank[c]:.{decimals}f}" for c in b.order)
    return " > ".join(cells) + f" | mean item rank (descriptive): {desc}"


def contradicts(order: Sequence[str], beats: Sequence[Pair]) -> list[Pair]:
    """The significant verdicts an order places the wrong way round (empty for a board's order
    without cycles): a check for tests and for any table that sorts conditions."""
    pos = {c: k for k, c in enumerate(order)}
    return [(w, l) for w, l in beats if w in pos and l in pos and pos[w] > pos[l]]


__all__ = ["Board", "Detectable", "TIER_RULE", "Pair", "board", "board_line", "contradicts", "tier_note"]
