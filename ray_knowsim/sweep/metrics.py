"""Conversation metrics, early stops and failure-mode totals from the kernel's per-turn counters.

Why a vectorised twin of ``Trajectory.summary``: the kernel returns counters for thousands of
(setting, conversation) sessions at once; summarising them one by one in Python would cost more
than the kernel itself. Every value is computed with the same float operations in the same order
as ``rules.final_metrics`` / ``rules.termination`` (sums are left-to-right running sums, means are
sum / count, F1 is ``2 * p * r / (p + r)``), so on Python 3.11 the two agree bit for bit;
``tests/sweep/test_rescore.py`` checks that against the plain-Python path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ray_knowsim.schema.metrics import BUILTIN_METRICS, names
from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.rules.config import TerminationConfig
from ray_knowsim.rules.turn_metrics import FAILURE_MODE_VARIANTS

#: the reference records' two absorbed-F1 variants a re-scored row also carries, after DC's parts
#: (spec §9.1 / D11)
DC_VARIANTS: tuple[str, ...] = ("dc_any", "dc_legacy")
#: float columns of a re-scored row: the catalogue's state metrics (ray_knowsim.schema.metrics)
#: with their parts, then at the early stop
FLOAT_COLUMNS: tuple[str, ...] = (
    *(c for m in BUILTIN_METRICS if m.source == "state" for c in (*m.columns(), *(DC_VARIANTS if m.name == "dc" else ()))),
    *names(source="state", variant="es"),
)  # fmt: skip
FM_COLUMNS: tuple[str, ...] = tuple(f"fm_{m}" for m in FAILURE_MODES + FAILURE_MODE_VARIANTS)
#: integer columns (``early_stop_turn`` / ``mastery_turn``: 1-based, 0 = none, null in tables)
INT_COLUMNS: tuple[str, ...] = (
    "tau", "turns", "early_stop_turn", "mastery_turn", "overloaded_turns", "raw_state_progress",
    "new_ius", "disallowed", *FM_COLUMNS,
)  # fmt: skip
NULLABLE_INT = frozenset({"early_stop_turn", "mastery_turn"})
#: the kernel counters a row is computed from
USED_COUNTERS: tuple[str, ...] = (
    "absorbed_gain", "ic_numerator", "ic_denominator", "zpd_size", "absorbed_ic_numerator",
    "absorbed_ic_numerator_any_partial", "perceived_overload", "engagement", "capacity_load", "overload",
    "n_upward_transitions", "n_knows_well", "new_ius", "disallowed", *FAILURE_MODES, *FAILURE_MODE_VARIANTS,
)  # fmt: skip
#: ``early_stop_reason`` codes
STOP_REASONS: tuple[str | None, ...] = (None, "mastery", "cognitive_overload")


@dataclass
class Termination:
    """Per-session termination rules as arrays (``rules.config.TerminationConfig``)."""

    paper: np.ndarray  # bool: the paper's two-of-three rule, else the reference rule
    min_turn: np.ndarray
    window: np.ndarray
    min_overloaded: np.ndarray
    max_upward: np.ndarray
    mastery_fraction: np.ndarray

    @classmethod
    def repeat(cls, configs: list[TerminationConfig], each: int) -> "Termination":
        """Arrays for sessions laid out config-major, ``each`` sessions per config."""

        def arr(fn, dtype):
            return np.repeat(np.array([fn(c) for c in configs], dtype=dtype), each)

        return cls(
            arr(lambda c: c.rule == "paper", bool),
            arr(lambda c: c.min_turn, np.int64),
            arr(lambda c: c.window, np.int64),
            arr(lambda c: c.min_overloaded, np.int64),
            arr(lambda c: c.max_upward, np.int64),
            arr(lambda c: c.mastery_fraction, np.float64),
        )


def f1(num: np.ndarray, den: np.ndarray, zpd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rules.final_metrics._f1`` elementwise: precision 0 when den = 0, recall 1 when zpd = 0."""
    precision = np.divide(num, den, out=np.zeros_like(num), where=den != 0)
    recall = np.divide(num, zpd, out=np.ones_like(num), where=zpd != 0)
    total = precision + recall
    score = np.divide(2 * precision * recall, total, out=np.zeros_like(num), where=total != 0)
    return precision, recall, score


def _first_turn(hit: np.ndarray) -> np.ndarray:
    """1-based index of the first True per row, 0 when none."""
    any_hit = hit.any(axis=1)
    return np.where(any_hit, hit.argmax(axis=1) + 1, 0)


def _window_sum(cum: np.ndarray, t: int, lo: np.ndarray) -> np.ndarray:
    return cum[:, t] - cum[np.arange(cum.shape[0]), lo]


def early_stops(
    overload: np.ndarray, n_up: np.ndarray, knows_well: np.ndarray, nothing: np.ndarray,
    n_turns: np.ndarray, n_ius: np.ndarray, term: Termination,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(stop turn, reason code, mastery turn) per session, as ``rules.termination.early_stop``.

    Inputs are ``[S, T]`` per-turn facts with zeros past each session's last turn."""
    s, t_max = overload.shape
    valid = np.arange(t_max)[None, :] < n_turns[:, None]
    share = knows_well / np.where(n_ius > 0, n_ius, 1)[:, None]
    mastery = _first_turn(valid & (share >= term.mastery_fraction[:, None]))

    def cum(x: np.ndarray) -> np.ndarray:
        out = np.zeros((s, t_max + 1), dtype=np.int64)
        np.cumsum(x.astype(np.int64), axis=1, out=out[:, 1:])
        return out

    c_over, c_up, c_nothing = cum(overload), cum(n_up), cum(nothing & valid)
    over_t = np.zeros(s, dtype=np.int64)
    for t in range(1, t_max + 1):
        lo = np.maximum(0, t - term.window)
        o = _window_sum(c_over, t, lo)
        u = _window_sum(c_up, t, lo)
        sym_over = o >= term.min_overloaded
        sym_up = u <= term.max_upward
        reference = sym_over & sym_up
        paper = (sym_over.astype(np.int64) + sym_up + (_window_sum(c_nothing, t, lo) == t - lo)) >= 2
        fired = np.where(term.paper, paper, reference) & (t >= term.min_turn) & (t <= n_turns) & (over_t == 0)
        over_t[fired] = t
    use_mastery = (mastery > 0) & ((over_t == 0) | (mastery <= over_t))
    stop = np.where(use_mastery, mastery, over_t)
    reason = np.where(use_mastery, 1, np.where(over_t > 0, 2, 0)).astype(np.int8)
    return stop, reason, mastery


def summarize(
    counters: np.ndarray,
    counter_index: dict[str, int],
    n_turns: np.ndarray,
    headroom: np.ndarray,
    n_ius: np.ndarray,
    term: Termination,
) -> dict[str, np.ndarray]:
    """Row columns (FLOAT_COLUMNS, INT_COLUMNS except tau and raw_state_progress, and the reason
    code ``early_stop_reason``) from ``counters[S, T, C]`` (NaN past each session's last turn)."""
    s, t_max, _ = counters.shape
    used = {name: k for k, name in enumerate(USED_COUNTERS)}
    # [used counter, S, T], contiguous per counter; NaN (only past a session's last turn) -> 0
    by_counter = np.ascontiguousarray(np.moveaxis(counters[:, :, [counter_index[n] for n in USED_COUNTERS]], 2, 0))
    np.copyto(by_counter, 0.0, where=np.isnan(by_counter))

    def col(name: str) -> np.ndarray:
        return by_counter[used[name]]

    def running(name: str) -> np.ndarray:
        return np.cumsum(col(name), axis=1)  # left-to-right, like sum() over the turn list

    def upto(cum: np.ndarray, k: np.ndarray) -> np.ndarray:
        out = np.zeros(s)
        m = k > 0
        out[m] = cum[np.flatnonzero(m), k[m] - 1]
        return out

    cum = {
        name: running(name)
        for name in (
            "absorbed_gain", "ic_numerator", "ic_denominator", "zpd_size", "absorbed_ic_numerator",
            "perceived_overload", "engagement", "capacity_load",
        )
    }  # fmt: skip

    def mean(name: str, k: np.ndarray) -> np.ndarray:
        return np.divide(upto(cum[name], k), k, out=np.zeros(s), where=k > 0)

    def block(k: np.ndarray) -> dict[str, np.ndarray]:
        kg = upto(cum["absorbed_gain"], k)
        num, den, zpd = (upto(cum[n], k) for n in ("ic_numerator", "ic_denominator", "zpd_size"))
        p, r, ic = f1(num, den, zpd)
        dp, dr, dc = f1(upto(cum["absorbed_ic_numerator"], k), den, zpd)
        po, eng, co = mean("perceived_overload", k), mean("engagement", k), mean("capacity_load", k)
        le = (np.maximum(0.0, 1 - po) + p + eng) / 3
        nkg = np.divide(kg, headroom, out=np.zeros(s), where=headroom != 0)
        return {
            "kg": kg, "nkg": nkg, "dc": dc, "dc_precision": dp, "dc_recall": dr, "ic": ic, "ic_precision": p,
            "ic_recall": r, "co": co, "po": po, "engagement": eng, "learning_experience": le, "_den": den, "_zpd": zpd,
        }  # fmt: skip

    out = block(n_turns)
    den, zpd = out.pop("_den"), out.pop("_zpd")
    n_any = upto(running("absorbed_ic_numerator_any_partial"), n_turns)
    legacy = np.minimum(col("ic_numerator"), col("n_upward_transitions")).sum(axis=1)  # integers: exact
    out["dc_any"] = f1(n_any, den, zpd)[2]
    out["dc_legacy"] = f1(legacy, den, zpd)[2]

    overload = col("overload") != 0
    stop, reason, mastery = early_stops(
        overload, col("n_upward_transitions"), col("n_knows_well"), col("ic_denominator") == 0, n_turns, n_ius, term
    )
    es = block(np.where(stop > 0, stop, n_turns))
    for m in BUILTIN_METRICS:
        if m.source == "state" and m.es_name:
            out[m.es_name] = es[m.name]
    out["turns"] = n_turns.astype(np.int64)
    out["early_stop_turn"] = stop
    out["early_stop_reason"] = reason
    out["mastery_turn"] = mastery
    out["overloaded_turns"] = overload.sum(axis=1).astype(np.int64)
    for name in ("new_ius", "disallowed"):
        out[name] = col(name).sum(axis=1).astype(np.int64)
    for m in FAILURE_MODES + FAILURE_MODE_VARIANTS:
        out[f"fm_{m}"] = col(m).sum(axis=1).astype(np.int64)
    return out


__all__ = ["FLOAT_COLUMNS", "FM_COLUMNS", "INT_COLUMNS", "NULLABLE_INT", "STOP_REASONS", "Termination", "early_stops", "f1", "summarize"]
