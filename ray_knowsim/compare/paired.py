"""Paired comparisons of conditions from session rows (pure: pandas in, pandas out; no I/O).

Input: one row per ok session with ``task, item_id, knowledge_level, trial, match, condition`` and
the metric columns; ``match`` identifies the starting point of a cell (the initial state), so two
sessions pair only when they are the same task, item, level, trial AND start from the same state.

**Items are the unit** of every verdict: a benchmark samples items, and the cells of one item
(trials, levels) are not independent evidence. Per pair of conditions and scope (a level, or
``knowledge_level = "all"``, the level-marginal), each item contributes the sign of its mean
paired difference (mean over its matched cells; for "all", the mean over levels of its per-level
means). The verdict is ONE procedure (:mod:`ray_knowsim.stats.signs`): the exact sign test over
items, and its inversion, the Clopper–Pearson interval of the **win rate** (the share of non-tied
items the first condition wins), both at the row's level in the family: Holm's procedure, computed
as its closure (each rejection passes its share of alpha on: from alpha / m up; Bonferroni's alpha / m
when an equivalence margin is asked for). A row
is significant exactly when its adjusted win-rate interval excludes 1/2, and one item can never
make a result: with n non-tied items the smallest p-value is 2^(1-n), so a family of m
comparisons needs ``min_items`` = floor(log2(2 m / alpha)) + 1 of them before anything can be
significant. The tables say so (``testable``) and give the minimum detectable effect instead.

Output tables (every row validated by a pydantic model below):

* ``paired`` — per (task, knowledge_level, metric) and pair (a before b in condition order):
  n_pairs matched cells, n_items (matched items), n_pos / n_neg / n_tied items (raw sign of a − b),
  wins / losses / ties (oriented: a win is an item on which a is better), the win rate among
  non-tied items, the net win rate (wins − losses) / n_items over all matched items with its
  adjusted interval (the equivalence test's, :func:`ray_knowsim.stats.sequential.equivalence_interval`;
  ``equivalent`` when the tie-inclusive win rate is shown inside 1/2 ± ``effect`` by
  :func:`ray_knowsim.stats.sequential.equivalent`, the one equivalence test an adaptive run's
  ``pairs`` decisions use too), ``zero_width``, ``sentence``, mean_diff = mean(a − b) (the
  level-marginal: mean over levels of the level mean differences) with a *descriptive* 95 %
  item-clustered interval (``ci_low/ci_high``, no verdict rests on it), win_rate and its adjusted
  interval (``win_low_adj/win_high_adj``), p_value (exact sign test over items), p_adj
  (Holm), family_size, level, min_items, testable, significant, better.
* ``best`` — per (task, knowledge_level, metric, condition): n, items, mean with the same
  item-clustered 95 % interval as the run's tables (one number on every surface) and the rank of
  the mean (:mod:`ray_knowsim.stats.ranks`; descriptive: the leaderboard orders by the item win
  rate, :mod:`ray_knowsim.compare.leaderboard`).
* ``mde`` — per paired row: the minimum detectable win rate at the run's non-tied items (exact
  binomial power, unadjusted and at alpha / m) and the same as a mean difference in the metric's
  units under a normal location shift of the per-item differences.

**The family** is, by default (``family="run"``), the whole comparison: every paired row of every
task, level (and the level-marginal), metric and condition pair, so every "A beats B" holds
together at family-wise error <= alpha. ``family="level_metric"`` makes each (task,
knowledge_level, metric) its own family: fewer items needed, but over 8 metrics x 4 scopes an
A/A pair is flagged somewhere far more often than alpha.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ray_knowsim.schema.states import level_order
from ray_knowsim.schema.metrics import outside_metrics
from ray_knowsim.schema.results import COMPARE_METRICS
from ray_knowsim.stats.defaults import ALPHA, POWER
from ray_knowsim.stats import signs as G
from ray_knowsim.stats.descriptive import clustered_mean, item_sums
from ray_knowsim.stats.multiplicity import bonferroni, family_verdicts, holm_adjusted
from ray_knowsim.stats.sequential import equivalence_interval
from ray_knowsim.stats.sequential import equivalent as equivalent_test
from ray_knowsim.compare.sentences import verdict_sentence
from ray_knowsim.stats.ranks import higher_is_better, rank_min
from ray_knowsim.stats.winrate import win_counts

ALL_LEVELS = "all"
DEFAULT_METRICS: tuple[str, ...] = COMPARE_METRICS
CELL_KEYS = ("task", "item_id", "knowledge_level", "trial", "match")


class CompareOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metrics: list[str] | None = None  # None: DEFAULT_METRICS present with data
    alpha: float = Field(ALPHA, gt=0, lt=1)
    power: float = Field(POWER, gt=0, lt=1)
    # the family: "run" = every paired row of the comparison (all tasks, levels, metrics and
    # pairs); "level_metric" = one (task, knowledge_level, metric) over its condition pairs
    family: Literal["run", "level_metric"] = "run"
    # a margin of the tie-inclusive win rate (adaptive's ``effect``, same scale): a pair is shown
    # "equivalent" (smaller than the effect) when stats.sequential.equivalent shows it inside 1/2 +- effect,
    # i.e. the net win rate (wins - losses) / matched items inside +-2 effect; ties count
    effect: float | None = Field(None, gt=0, lt=0.5)


class PairedRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    higher_is_better: bool
    condition_a: str
    condition_b: str
    n_pairs: int  # matched cells
    n_items: int  # items with a matched cell
    n_pos: int  # items whose mean difference a - b is > 0
    n_neg: int
    n_tied: int
    wins: int  # items on which a is better (oriented by higher_is_better): the verdict's counts
    losses: int  # items on which b is better
    ties: int  # items whose mean difference is 0 (to TIE_DECIMALS decimals); wins + losses + ties = n_items
    mean_a: float
    mean_b: float
    mean_diff: float  # a - b
    ci_low: float  # descriptive 95 % item-clustered interval of mean_diff (no verdict)
    ci_high: float
    zero_width: bool  # ci_low == ci_high: every item has the same mean difference (e.g. all tie)
    sd_item_diff: float  # standard deviation of the per-item mean differences
    win_rate: float  # a's win rate among non-tied items: wins / (wins + losses), what the sign test is about
    win_low_adj: float  # its Clopper-Pearson interval at 1 - level (the Holm level the row was tested at)
    win_high_adj: float
    win_rate_ties_half: float  # (wins + ties / 2) / n_items: the leaderboard's theta (mean item rank)
    net_win_rate: float  # (wins - losses) / n_items over ALL matched items
    net_low_adj: float  # the equivalence test's interval at alpha / family_size (stats.sequential.equivalence_interval, net scale; Holm's first step)
    net_high_adj: float
    p_value: float  # exact two-sided sign test over items
    p_adj: float  # Holm's adjusted p-value over the family (Bonferroni's min(1, m p) when an effect is asked for)
    family_size: int
    level: float  # the family level the row's test and interval are at: Holm's, from alpha / m up (alpha / m with effect)
    min_items: int  # non-tied items a result needs at Holm's first step (alpha / family_size)
    testable: bool  # n_pos + n_neg >= min_items, or significant (a later Holm step's larger level)
    significant: bool  # the win-rate interval at ``level`` excludes 1/2 (<=> p_adj < alpha)
    better: str | None  # the condition that wins (orientation-aware), when significant
    effect: float | None  # the equivalence margin asked for (CompareOptions.effect)
    equivalent: bool  # the adjusted win rate (ties half) lies inside 1/2 +- effect (net inside +-2 effect)
    sentence: str  # the verdict in words, with its counts (compare.sentences.verdict_sentence)


class BestRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    higher_is_better: bool
    condition: str
    n: int
    n_items: int
    mean: float
    ci_low: float  # item-clustered 95 % interval (as tables/level_means and tables/marginal)
    ci_high: float
    zero_width: bool  # ci_low == ci_high: every item has the same mean
    rank: float  # rank of the mean, 1 = best ("min" ties): descriptive (the paper's), no verdict rests on it


class MdeRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str
    knowledge_level: str
    metric: str
    condition_a: str
    condition_b: str
    n_items: int  # non-tied items
    family_size: int
    min_items: int
    alpha: float
    power: float
    mde_win_rate: float  # at alpha (NaN: no outcome of n items reaches it)
    mde_win_rate_adj: float  # at alpha / family_size
    sd_item_diff: float
    mde: float  # mde_win_rate as a mean difference under a normal shift: sd * Phi^-1(q)
    mde_adj: float


def pick_metrics(sessions: pd.DataFrame, wanted: Sequence[str] | None) -> list[str]:
    if wanted:
        missing = [m for m in wanted if m not in sessions.columns]
        if missing:
            raise ValueError(f"metrics not in the session rows: {missing}")
        return list(wanted)
    return [m for m in default_metrics() if m in sessions.columns and sessions[m].notna().any()]


def default_metrics() -> tuple[str, ...]:
    """What compare tests when no metric is named: the catalogue's compared metrics, then the
    outside metrics this process registered that ask to be compared (ray_knowsim.schema.metrics)."""
    return (*DEFAULT_METRICS, *(m.name for m in outside_metrics() if m.compared))


def _f(x: float) -> float:
    return float(x) if x is not None and np.isfinite(x) else math.nan


def analyse(sessions: pd.DataFrame, conditions: Sequence[str] | None = None,
            options: CompareOptions | None = None) -> dict[str, pd.DataFrame]:
    """The ``paired``, ``best`` and ``mde`` tables (see the module docstring)."""
    opts = options or CompareOptions()
    metrics = pick_metrics(sessions, opts.metrics)
    conds = list(conditions) if conditions is not None else list(dict.fromkeys(sessions["condition"]))
    paired: list[dict] = []
    best: list[dict] = []
    for task in sorted(sessions["task"].unique()):
        part = sessions[sessions["task"] == task].assign(item_id=lambda d: d["item_id"].astype(str))
        items = sorted(part["item_id"].unique())
        item_pos = {it: k for k, it in enumerate(items)}
        levels = level_order(part["knowledge_level"].unique())
        here = [c for c in conds if c in set(part["condition"])]
        for metric in metrics:
            hib = higher_is_better(metric)
            wide = part.pivot_table(index=list(CELL_KEYS[1:]), columns="condition", values=metric, aggfunc="mean")
            wide = wide.reindex(columns=here)
            paired += _pairs(task, metric, hib, wide, levels, here, item_pos)
            best += _best(task, metric, hib, part, levels, here, item_pos)
    mdes = _adjust(paired, opts)
    return {"paired": _frame(paired, PairedRow), "best": _frame(best, BestRow), "mde": _frame(mdes, MdeRow)}


def _frame(rows: list[dict], model: type[BaseModel]) -> pd.DataFrame:
    checked = [model(**r).model_dump() for r in rows]
    return pd.DataFrame(checked, columns=list(model.model_fields))


def _per_item(idx: np.ndarray, values: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """(counts, sums) per item of the non-NaN ``values``: :func:`ray_knowsim.stats.descriptive.item_sums`."""
    return item_sums(idx, values, n_items)


def _pairs(task, metric, hib, wide, levels, conds, item_pos) -> list[dict]:
    """The paired rows of one (task, metric): each level, then the level-marginal."""
    n_items = len(item_pos)
    have_levels = set(wide.index.get_level_values("knowledge_level"))
    rows = []
    for a, b in combinations(conds, 2):
        counts, sums, means_a, means_b, n_cells = [], [], [], [], []
        for level in levels:
            if level not in have_levels:
                continue
            lv = wide.xs(level, level="knowledge_level")
            idx = np.array([item_pos[str(i)] for i in lv.index.get_level_values("item_id")], dtype=np.int64)
            d = (lv[a] - lv[b]).to_numpy(dtype=float)
            c, s = _per_item(idx, d, n_items)
            if not c.sum():
                continue
            matched = ~np.isnan(d)
            ma, mb = lv[a].to_numpy(dtype=float)[matched].mean(), lv[b].to_numpy(dtype=float)[matched].mean()
            rows.append(_row(task, level, metric, hib, a, b, c[None, :], s[None, :], ma, mb, int(c.sum())))
            counts.append(c), sums.append(s), means_a.append(ma), means_b.append(mb), n_cells.append(int(c.sum()))
        if counts:
            rows.append(_row(task, ALL_LEVELS, metric, hib, a, b, np.vstack(counts), np.vstack(sums),
                             float(np.mean(means_a)), float(np.mean(means_b)), sum(n_cells)))
    return rows


def _row(task, level, metric, hib, a, b, counts: np.ndarray, sums: np.ndarray, mean_a, mean_b, n_pairs) -> dict:
    """One paired row before the family adjustment: ``counts``/``sums`` are (levels, items) arrays
    of matched cells' differences."""
    cm = clustered_mean(counts, sums)  # the mean over levels of the level mean differences
    with np.errstate(invalid="ignore", divide="ignore"):
        per_level_item = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    seen = counts.sum(axis=0) > 0
    item_diffs = np.nanmean(per_level_item[:, seen], axis=0) if seen.any() else np.zeros(0)
    counts_ = win_counts(item_diffs, np.zeros_like(item_diffs), hib)  # THE per-pair count (stats.winrate)
    wins, losses, ties, n = counts_.wins, counts_.losses, counts_.ties, counts_.n
    n_pos, n_neg = (wins, losses) if hib else (losses, wins)
    sd = float(np.std(item_diffs, ddof=1)) if item_diffs.size > 1 else math.nan
    lo, hi = _f(cm.ci_low), _f(cm.ci_high)
    return dict(task=task, knowledge_level=level, metric=metric, higher_is_better=hib, condition_a=a, condition_b=b,
                n_pairs=n_pairs, n_items=int(seen.sum()), n_pos=n_pos, n_neg=n_neg, n_tied=ties,
                wins=wins, losses=losses, ties=ties,
                mean_a=_f(mean_a), mean_b=_f(mean_b), mean_diff=_f(cm.mean), ci_low=lo, ci_high=hi,
                zero_width=bool(math.isfinite(lo) and lo == hi), sd_item_diff=_f(sd),
                win_rate=wins / counts_.decisive if counts_.decisive else math.nan,
                win_rate_ties_half=counts_.win_rate, net_win_rate=counts_.net, p_value=G.sign_test(wins, losses))


def _best(task, metric, hib, part, levels, conds, item_pos) -> list[dict]:
    """Per scope and condition: mean and item-clustered CI (the tables' statistic) and the rank of the mean."""
    n_items = len(item_pos)
    idx_all = part["item_id"].map(item_pos).to_numpy(dtype=np.int64)
    values = part[metric].to_numpy(dtype=float)
    rows = []
    per: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}  # cond -> level -> (counts, sums)
    for c in conds:
        mask_c = (part["condition"] == c).to_numpy()
        per[c] = {}
        for level in levels:
            mask = mask_c & (part["knowledge_level"] == level).to_numpy()
            if mask.any():
                per[c][level] = _per_item(idx_all[mask], values[mask], n_items)
    for scope in [*levels, ALL_LEVELS]:
        stat = {}
        for c in conds:
            use = [lv for lv in (levels if scope == ALL_LEVELS else [scope]) if lv in per[c] and per[c][lv][0].sum()]
            if not use:
                continue
            counts = np.vstack([per[c][lv][0] for lv in use])
            sums = np.vstack([per[c][lv][1] for lv in use])
            stat[c] = clustered_mean(counts, sums)
        if not stat:
            continue
        ranks = rank_min({c: stat[c].mean for c in stat}, not hib)
        for c, s in stat.items():
            lo, hi = _f(s.ci_low), _f(s.ci_high)
            rows.append(dict(task=task, knowledge_level=scope, metric=metric, higher_is_better=hib, condition=c, n=s.n,
                             n_items=s.n_items, mean=_f(s.mean), ci_low=lo, ci_high=hi, zero_width=bool(math.isfinite(lo) and lo == hi),
                             rank=_f(ranks[c])))
    return rows


def family_key(row: dict, family: str) -> tuple:
    return () if family == "run" else (row["task"], row["knowledge_level"], row["metric"])


def _adjust(paired: list[dict], opts: CompareOptions) -> list[dict]:
    """The family's verdicts by the rule every design uses (stats.multiplicity.family_verdicts, as
    an adaptive run and a replay's fixed design do, so they agree on the same counts): Holm's
    procedure as its closure over the rows' exact sign tests -- each rejection passes its share of
    alpha on, so Holm decides everything Bonferroni does and more, at the same family-wise error --
    or Bonferroni's alpha / m when an equivalence margin is asked for (an equivalence claim must
    not pass its share on to the direction tests: why in family_verdicts). One verdict per row: its
    interval is at the level the family tested it at (``level``), significant exactly when that
    interval excludes 1/2. Returns the MDE rows (at the first Holm step, alpha / m). Mutates
    ``paired``."""
    families: dict[tuple, list[dict]] = {}
    for r in paired:
        families.setdefault(family_key(r, opts.family), []).append(r)
    mdes = []
    for rows in families.values():
        m = len(rows)
        first = opts.alpha / m
        need = G.min_items(first)
        p = [G.sign_test(r["wins"], r["losses"]) for r in rows]

        def own(i: int, lv: float) -> tuple[int, bool]:
            r = rows[i]
            direction = (1 if r["wins"] > r["losses"] else -1) if p[i] < lv else 0
            return direction, opts.effect is not None and equivalent_test(r["wins"], r["ties"], r["losses"], opts.effect, lv)

        closed = family_verdicts(range(m), own, opts.alpha, equivalence=opts.effect is not None)
        levels = [closed[i].level for i in range(m)]
        p_adj = holm_adjusted(p) if opts.effect is None else bonferroni(p, m)
        for r, level, pa in zip(rows, levels, p_adj):
            v = G.verdict(G.SignCounts(r["wins"], r["losses"], r["ties"]), level)  # direction +1: a is better
            n = r["wins"] + r["losses"]
            theta_lo, theta_hi = equivalence_interval(r["wins"], r["ties"], r["losses"], first)  # THE equivalence test's
            net_lo, net_hi = 2.0 * theta_lo - 1.0, 2.0 * theta_hi - 1.0  # net win rate = 2 x tie-inclusive win rate - 1
            better = (r["condition_a"] if v.direction > 0 else r["condition_b"]) if v.significant else None
            equivalent = opts.effect is not None and equivalent_test(r["wins"], r["ties"], r["losses"], opts.effect, level)
            r.update(win_low_adj=v.ci_low, win_high_adj=v.ci_high, net_low_adj=net_lo, net_high_adj=net_hi,
                     p_adj=float(pa), family_size=m, level=float(level), min_items=need,
                     testable=n >= need or v.significant, significant=v.significant, better=better, effect=opts.effect,
                     equivalent=bool(equivalent))
            r["sentence"] = verdict_sentence(r["condition_a"], r["condition_b"], r["metric"], r["knowledge_level"], r["wins"],
                                             r["losses"], r["ties"], better=better, p_adj=r["p_adj"], equivalent=r["equivalent"],
                                             effect=opts.effect, min_items=need, net_interval=(net_lo, net_hi))
            q, q_adj = G.mde_win_rate(n, opts.alpha, opts.power), G.mde_win_rate(n, first, opts.power)
            mdes.append(dict(task=r["task"], knowledge_level=r["knowledge_level"], metric=r["metric"],
                             condition_a=r["condition_a"], condition_b=r["condition_b"], n_items=n, family_size=m,
                             min_items=need, alpha=opts.alpha, power=opts.power, mde_win_rate=q, mde_win_rate_adj=q_adj,
                             sd_item_diff=r["sd_item_diff"], mde=G.shift_effect(q, r["sd_item_diff"]),
                             mde_adj=G.shift_effect(q_adj, r["sd_item_diff"])))
    return mdes


def beats_matrix(paired: pd.DataFrame, task: str, level: str) -> tuple[list[str], dict[tuple[str, str], list[str]]]:
    """Conditions and, per ordered (winner, loser), the metrics on which the winner significantly
    beats the loser (from the ``paired`` table)."""
    part = paired[(paired["task"] == task) & (paired["knowledge_level"] == level)]
    conds = list(dict.fromkeys([*part["condition_a"], *part["condition_b"]]))
    wins: dict[tuple[str, str], list[str]] = {}
    for _, r in part.iterrows():
        if r["better"] is None or (isinstance(r["better"], float) and math.isnan(r["better"])):
            continue
        loser = r["condition_b"] if r["better"] == r["condition_a"] else r["condition_a"]
        wins.setdefault((r["better"], loser), []).append(r["metric"])
    return conds, wins


def too_few_items(paired: pd.DataFrame, task: str, alpha: float, level: str | None = None) -> str | None:
    """A sentence when no row of (task[, level]) can be significant at its family's size: the
    items are too few for any verdict (None when at least one row is testable)."""
    part = paired[paired["task"] == task]
    if level is not None:
        part = part[part["knowledge_level"] == level]
    if part.empty or part["testable"].any():
        return None
    most = int((part["n_pos"] + part["n_neg"]).max())
    need, m = int(part["min_items"].max()), int(part["family_size"].max())
    return (f"Too few items for any verdict: in {task}, at most {most} item(s) tell two conditions apart, and a family "
            f"of {m} comparisons at alpha {alpha:g} needs at least {need} before any result can be significant (with n "
            "items the smallest sign-test p-value is 2^(1-n)). Nothing here says who beats whom; mde.csv gives the "
            "effects this run could detect.")


__all__ = [
    "ALL_LEVELS", "BestRow", "CELL_KEYS", "CompareOptions", "DEFAULT_METRICS", "MdeRow", "PairedRow", "analyse",
    "beats_matrix", "default_metrics", "higher_is_better", "pick_metrics", "too_few_items",
]
