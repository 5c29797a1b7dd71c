"""One conversation as HTML: the messages, the load against capacity, every IU that was explained,
attempted or moved with its signal, state change, failure-mode class and why.

Shared by the report's page and ``ray-knowsim view``: ONE rendering of a conversation. It holds
no inline ``style`` attribute and no script, so it can be served under a Content-Security-Policy
without 'unsafe-inline' (colours are classes from :data:`CONVERSATION_CSS`, the load gauge is an
SVG drawn with geometry attributes). Every piece of run text goes through :func:`e`.
"""

from __future__ import annotations

import html
from typing import Sequence

from ray_knowsim.report.explain import SHORT_STATE, ConversationView, IUMove, TurnView
from ray_knowsim.report.metrics import MetricSpec, fmt
from ray_knowsim.report.plots import FM_COLOURS, FM_LABELS, FM_ORDER, STATE_COLOURS


def e(value: object) -> str:
    """HTML-escape any value (quotes included: safe in text and in quoted attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def attrs(**kv: object) -> str:
    """`` data-x="..."`` attributes (underscores become dashes), escaped; None values left out."""
    return "".join(f' {k.replace("_", "-")}="{e(v)}"' for k, v in kv.items() if v is not None)


def _colour_rules() -> str:
    states = "".join(
        f".st.s{i} {{ background:{c}; color:{'#fff' if i == 3 else '#000'}; }}\n" for i, c in enumerate(STATE_COLOURS)
    )
    modes = "".join(f".mode.{m}, .swatch.{m} {{ background:{c}; }}\n" for m, c in FM_COLOURS.items())
    return states + modes


CONVERSATION_CSS = (
    """
article.conv h3 { margin:6px 0; font-size:15px; word-break:break-all; }
.meta { display:flex; flex-wrap:wrap; gap:6px; margin-bottom:8px; }
.meta span { background:#eef2f6; border-radius:10px; padding:1px 9px; font-size:12px; }
ol.turns { list-style:none; padding:0; margin:0; }
li.turn { border:1px solid #dde3ea; border-radius:6px; margin:10px 0; padding:8px 12px; }
body.only-moves li.turn.no-moves { display:none; }
.turn-head { display:flex; flex-wrap:wrap; gap:10px; align-items:center; font-size:12px; color:#5d6978; }
.turn-head b { color:#1d232b; font-size:13px; }
.flag { border-radius:10px; padding:0 8px; font-size:11px; font-weight:600; }
.flag.over { background:#fbe3e3; color:#a32020; }
.flag.drop { background:#fff0d9; color:#8a5300; }
.flag.warn { background:#fff7c2; color:#6b5a00; }
svg.gauge { width:160px; height:8px; vertical-align:middle; }
svg.gauge .bg { fill:#edf0f3; }
svg.gauge .fill { fill:#7fb7e6; }
svg.gauge .fill.hot { fill:#d64545; }
svg.gauge .tau { fill:#17324d; }
.msgs { display:grid; grid-template-columns:1fr 1fr; gap:10px; margin:8px 0; align-items:start; }
.msg { border-radius:6px; padding:6px 10px; max-height:260px; overflow:auto; }
.msg.user { background:#f3f0fa; }
.msg.assistant { background:#eef6f0; }
.msg .who { font-size:11px; font-weight:600; color:#5d6978; margin-bottom:2px; }
.msg .text { white-space:pre-wrap; word-wrap:break-word; }
table.moves td { font-size:12px; padding:3px 6px; }
.st { display:inline-block; border-radius:3px; padding:0 5px; font-size:11px; }
.mode { border-radius:3px; padding:0 6px; font-size:11px; color:#fff; white-space:nowrap; }
.mode.under_absorbed { color:#000; }
.swatch { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:middle; }
.legend-line { font-size:12px; color:#5d6978; margin:4px 0 8px; }
@media (max-width: 900px) { .msgs { grid-template-columns:1fr; } }
"""
    + _colour_rules()
)


def state_chip(v: int) -> str:
    known = 0 <= v < len(STATE_COLOURS)
    return f'<span class="st{f" s{v}" if known else ""}">{e(SHORT_STATE[v] if known else v)}</span>'


def mode_badge(mode: str) -> str:
    return f'<span class="mode {e(mode)}">{e(FM_LABELS.get(mode, mode))}</span>'


def legend() -> str:
    """The failure-mode colour key shown above conversations."""
    return '<div class="legend-line">' + " ".join(mode_badge(m) for m in FM_ORDER) + "</div>"


def _move_row(m: IUMove) -> str:
    change = state_chip(m.pre) + (" → " + state_chip(m.post) if m.moved else "")
    signal = e(m.teaching_quality.replace("_", " ")) if m.teaching_quality != "not_mentioned" else "—"
    if m.attempt != "none":
        signal += f"; learner {e(m.attempt)}"
    title = f' title="{e(m.evidence)}"' if m.evidence else ""
    return (
        f'<tr class="{"moved" if m.moved else "still"}"{attrs(data_iu=m.iu_id)}><td{title}>{e(m.label)}</td><td>{signal}</td>'
        f"<td>{change}</td><td>{mode_badge(m.mode) if m.mode else ''}</td><td>{e(m.reason)}</td></tr>"
    )


def _gauge(t: TurnView) -> str:
    """Load against capacity as an SVG bar (percent geometry; the τ tick where capacity lies)."""
    scale = max(t.load, t.tau, 1e-9) * 1.15
    hot = " hot" if t.load > t.tau else ""
    return (
        '<svg class="gauge" viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true">'
        '<rect class="bg" x="0" y="0" width="100" height="8" rx="3"></rect>'
        f'<rect class="fill{hot}" x="0" y="0" width="{100 * t.load / scale:.1f}" height="8" rx="3"></rect>'
        f'<rect class="tau" x="{100 * t.tau / scale:.1f}" y="0" width="1.5" height="8"></rect></svg>'
    )


def _turn(t: TurnView, view: ConversationView) -> str:
    gauge = ""
    if view.has_state:
        gauge = (
            f'<span title="effective load {t.load:.2f} (comprehension {t.comprehension_load:.2f} + attempts {t.attempt_load:.2f}) vs capacity τ={t.tau}">'
            f"load {t.load:.2f} / τ {t.tau} {_gauge(t)}</span><span>η {t.eta:.2f}</span>"
        )
    flags = ""
    if t.overload:
        flags += '<span class="flag over" title="recorded overload flag: load ≥ τ">overload</span>'
    if t.dropoff:
        flags += '<span class="flag drop" title="load > τ: absorption scaled by η">dropoff</span>'
    if view.has_state and not t.fm_consistent:
        flags += '<span class="flag warn" title="recorded failure-mode counts differ from the classification derived here">fm counts differ</span>'
    if t.signal_error:
        flags += f'<span class="flag warn">{e(t.signal_error)}</span>'
    moved = f"<span>{len(t.moved)} IU moved</span>" if view.has_state else ""
    moves = ""
    if t.ius:
        moves = (
            '<table class="moves"><thead><tr><th>IU</th><th>signal</th><th>state</th><th>class</th><th>why</th></tr></thead>'
            f'<tbody>{"".join(_move_row(m) for m in t.ius)}</tbody></table>'
        )
    elif view.has_state:
        moves = '<div class="note">No IU explained, attempted or moved.</div>'
    cls = "turn" + ("" if t.moved else " no-moves")
    return (
        f'<li class="{cls}"{attrs(data_turn=t.turn)}><div class="turn-head"><b>Turn {t.turn}</b>{gauge}{flags}{moved}</div>'
        f'<div class="msgs"><div class="msg user"><div class="who">Learner (simulated)</div><div class="text">{e(t.user)}</div></div>'
        f'<div class="msg assistant"><div class="who">Assistant</div><div class="text">{e(t.assistant)}</div></div></div>{moves}</li>'
    )


def conversation_article(view: ConversationView, specs: Sequence[MetricSpec], trajectory: str | None, anchor: str) -> str:
    """``<article class="conv" id=anchor>``: meta chips, the state heatmap (a PNG data URI, or a
    note), then every turn."""
    s = view.session
    meta = [
        ("condition", s.get("condition")),
        ("level", s.get("knowledge_level")),
        ("task", s.get("task")),
        ("item", s.get("item_id")),
        ("turns", s.get("turns")),
        ("stop", s.get("stop_reason")),
        ("early stop", f"turn {s['early_stop_turn']} ({s.get('early_stop_reason')})" if s.get("early_stop_turn") else "none"),
        ("τ", s.get("tau")),
    ]
    for spec in specs:
        meta.append((spec.label, fmt(s.get(spec.column), spec.decimals)))
    chips = "".join(f"<span><b>{e(k)}</b> {e(v)}</span>" for k, v in meta if v is not None)
    fig = (
        f'<figure><img class="trajectory" alt="knowledge state per IU and turn" src="{e(trajectory)}">'
        "<figcaption>State of each IU after each turn (init = before turn 1). ● the IU moved up in that turn; "
        "▼ overloaded turn (load ≥ τ); dashed line: virtual early stop.</figcaption></figure>"
        if trajectory
        else f'<p class="note">{e(view.note or "no trajectory recorded")}</p>'
    )
    turns = "".join(_turn(t, view) for t in view.turns) or '<li class="note">No turns recorded for this conversation.</li>'
    return (
        f'<article class="conv" id="{e(anchor)}"{attrs(data_session=s.get("session_id"))}>'
        f'<h3>{e(s.get("session_id"))}</h3><div class="meta">{chips}</div>{fig}<ol class="turns">{turns}</ol></article>'
    )


__all__ = ["CONVERSATION_CSS", "attrs", "conversation_article", "e", "legend", "mode_badge", "state_chip"]
