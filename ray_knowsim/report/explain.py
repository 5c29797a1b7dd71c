"""Why each IU did (or did not) move in a turn, read back from the recorded rows.

The turn row records the post-turn states, loads, η and the overload flag; the session row the
graph and initial states. From these and the turn's signals we name, for every explained IU, its
failure-mode class (spec §10, via the rules' own classifier so the viewer cannot drift from the
counts) and a one-line reason: redundant, blocked by a weak prerequisite, absorbed, lost to the
overload dropoff (with the carried fraction), or not absorbed (shallow / at its ceiling).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ray_knowsim.schema.graph import GraphIndex, build_index, parse_graph
from ray_knowsim.schema.results import FAILURE_MODES
from ray_knowsim.schema.signals import SignalEntry, normalize_signals
from ray_knowsim.schema.states import UNAWARE
from ray_knowsim.rules.prerequisites import ceiling
from ray_knowsim.rules.turn_metrics import failure_modes
from ray_knowsim.rules.update import TurnUpdate

SHORT_STATE = ("unaware", "struggling", "partial", "knows well")


@dataclass
class IUMove:
    iu_id: str
    label: str
    pre: int
    post: int
    teaching_quality: str  # well_explained | shallow | not_mentioned
    attempt: str  # reasoning | articulation | none
    mode: str | None  # failure-mode class for explained IUs, else None
    reason: str
    carry: float = 0.0
    evidence: str = ""

    @property
    def moved(self) -> bool:
        return self.post != self.pre


@dataclass
class TurnView:
    turn: int
    user: str
    assistant: str
    load: float
    comprehension_load: float
    attempt_load: float
    tau: int
    eta: float
    overload: bool  # the recorded flag (L >= tau)
    ius: list[IUMove] = field(default_factory=list)  # explained, attempted or moved IUs
    recorded_fm: dict[str, int] = field(default_factory=dict)
    derived_fm: dict[str, int] = field(default_factory=dict)
    signal_error: str | None = None

    @property
    def dropoff(self) -> bool:
        return self.eta < 1.0

    @property
    def moved(self) -> list[IUMove]:
        return [m for m in self.ius if m.moved]

    @property
    def fm_consistent(self) -> bool:
        return not self.recorded_fm or self.recorded_fm == self.derived_fm


@dataclass
class ConversationView:
    session: dict[str, Any]
    ids: list[str]
    labels: list[str]
    states: list[list[int]]  # index 0 = initial, t = after turn t (empty without state)
    turns: list[TurnView]
    note: str = ""

    @property
    def has_state(self) -> bool:
        return bool(self.labels) and len(self.states) > 1


def _index(session: dict) -> GraphIndex | None:
    raw = session.get("graph_json") or ""
    try:
        data = json.loads(raw) if raw else None
        return build_index(parse_graph(data, session.get("item_id", "")), session.get("item_id", "")) if data else None
    except (ValueError, TypeError):
        return None


def _reason(g: GraphIndex | None, v: str, pre: dict[str, int], m: IUMove, turn: TurnView) -> str:
    tq = m.teaching_quality.replace("_", " ")
    if m.mode == "redundant":
        return f"already knows it well; explaining it again ({tq}) only adds load"
    if m.mode == "prereq_blocked":
        ceil = ceiling(g, v, pre) if g else None
        weak = ""
        if g and g.prereqs.get(v):
            p = min(g.prereqs[v], key=lambda p: pre.get(p, UNAWARE))
            weak = f" (weakest prerequisite {p}: {SHORT_STATE[pre.get(p, UNAWARE)]})"
        cap = f"ceiling {SHORT_STATE[ceil]}" if ceil is not None else "ceiling"
        suffix = "; it could only move to struggling" if m.moved else ""
        return f"outside the ZPD: {cap}{weak}{suffix}"
    if m.mode == "effective":
        extra = f" despite the dropoff (η={turn.eta:.2f})" if turn.dropoff else ""
        return f"{tq}: absorbed {SHORT_STATE[m.pre]} → {SHORT_STATE[m.post]}{extra}"
    if m.mode in ("overload_wasted", "under_absorbed"):
        over = f" in an overloaded turn (load {turn.load:.2f} > τ={turn.tau})" if m.mode == "overload_wasted" else ""
        if m.teaching_quality == "shallow" and m.pre != UNAWARE:
            return "shallow mention: shallow only unlocks unaware IUs" + over
        if g and m.pre >= ceiling(g, v, pre):
            return f"at its prerequisite ceiling ({SHORT_STATE[m.pre]})" + over
        if m.mode == "overload_wasted":
            return f"load {turn.load:.2f} > τ={turn.tau}: dropoff η={turn.eta:.2f}; carried {m.carry:.2f} of a step, not a full step"
        return f"{tq}, in the ZPD, but no transition"
    if m.moved:
        return "moved without being explained (unexpected under these rules)"
    if m.attempt != "none":
        return f"learner {m.attempt} attempt: adds load, no state change"
    return ""


def conversation_view(session: dict, turn_rows: list[dict]) -> ConversationView:
    """Assemble one conversation for the viewer (rows as :meth:`ray_knowsim.io.rundir.CommittedTable.rows_of` gives them)."""
    labels = list(session.get("iu_labels") or [])
    g = _index(session)
    ids = list(g.ids) if g and len(g.ids) == len(labels) else [lab.split(":", 1)[0].strip() for lab in labels]
    initial = list(session.get("initial_states") or [])
    tau = int(session.get("tau") or 0)
    rows = sorted(turn_rows, key=lambda r: r["turn"])
    states = [initial] if initial else []
    turns: list[TurnView] = []
    pre_list = initial
    for row in rows:
        post_list = list(row.get("states") or [])
        view = TurnView(
            turn=int(row["turn"]),
            user=row.get("user_message") or "",
            assistant=row.get("assistant_message") or "",
            load=float(row.get("effective_load") or 0.0),
            comprehension_load=float(row.get("comprehension_load") or 0.0),
            attempt_load=float(row.get("attempt_load") or 0.0),
            tau=tau,
            eta=float(row.get("eta") if row.get("eta") is not None else 1.0),
            overload=bool(row.get("overload")),
            recorded_fm={m: int(row.get(f"fm_{m}") or 0) for m in FAILURE_MODES},
        )
        if post_list and len(post_list) == len(ids) and len(pre_list) == len(ids):
            states.append(post_list)
            _fill_moves(view, g, ids, labels, pre_list, post_list, list(row.get("carries") or []), row.get("signals_json"))
            pre_list = post_list
        else:
            view.recorded_fm = {}
        turns.append(view)
    note = "" if labels else "no knowledge state (baseline simulator): messages only"
    return ConversationView(session, ids, labels, states if labels else [], turns, note)


def _fill_moves(view: TurnView, g, ids, labels, pre_list, post_list, carries, signals_json) -> None:
    pre = dict(zip(ids, (int(s) for s in pre_list)))
    post = dict(zip(ids, (int(s) for s in post_list)))
    carry = dict(zip(ids, carries)) if len(carries) == len(ids) else {}
    try:
        entries: list[SignalEntry] = normalize_signals(json.loads(signals_json or "[]"))
    except (ValueError, TypeError) as exc:
        entries = []
        view.signal_error = f"unreadable signals_json: {exc}"
    by_id = {e.id: e for e in entries if e.id is not None}
    explained = {e.id for e in entries if e.mentioned and e.id in pre}
    # the turn's update as recorded (loads, flag, dropoff): failure modes are re-derived against it
    update = TurnUpdate(post=post, carries=carry, comprehension_load=view.comprehension_load,
                        attempt_load=view.attempt_load, effective_load=view.load, overload=view.overload,
                        dropoff_active=view.dropoff, eta=view.eta)
    derived = dict.fromkeys(FAILURE_MODES, 0)
    label_of = dict(zip(ids, labels))
    for v in ids:
        e = by_id.get(v)
        tq = e.teaching_quality if e else "not_mentioned"
        attempt = e.user_attempt_type if e else "none"
        mode = None
        if v in explained and g is not None:
            counts = failure_modes(g, pre, post, {v}, update, view.tau)
            mode = next((m for m in FAILURE_MODES if counts.get(m)), None)
            if mode:
                derived[mode] += 1
        if v not in explained and attempt == "none" and pre[v] == post[v]:
            continue
        move = IUMove(v, label_of[v], pre[v], post[v], tq, attempt, mode, "", float(carry.get(v, 0.0)), e.teaching_quality_reasoning if e else "")
        move.reason = _reason(g, v, pre, move, view)
        view.ius.append(move)
    view.derived_fm = derived if g is not None else view.recorded_fm
    order = {m: i for i, m in enumerate(("effective", "overload_wasted", "prereq_blocked", "under_absorbed", "redundant"))}
    view.ius.sort(key=lambda m: (not m.moved, order.get(m.mode or "", 9), ids.index(m.iu_id)))
