"""What `ray-knowsim adaptive-replay` prints by default (issue 51): the adaptive design's decisions
against the fixed design's, its share of the fixed design's sessions, each decision in a few
words, and where the full record is. Pure: it reads the record
:func:`ray_knowsim.adaptive.planning.replay` returns (what ``--json`` prints, decisions.json's fields).

:func:`ray_knowsim.stats.adaptive.session_share` is the one place the share of sessions is computed: the replay's summary,
the adaptive run's last line and the report's trace all say it from here.
"""

from __future__ import annotations

from typing import Any

from ray_knowsim.text import fit
from ray_knowsim.stats.adaptive import session_share

MAX_DECISION_LINES = 8  # the rest: in the record


def decision_text(d: dict[str, Any]) -> str:
    """One decision in a few words: its outcome and round, or why it is open."""
    if not d["decided"]:
        if d["in_play"]:
            return f"undecided, in play {', '.join(d['in_play'])}"
        return "undecided: no outcome reachable with the pool's remaining items"
    if d["kind"] == "best":
        what = d["winner"] or ("no winner (cycle " + " > ".join(d["cycle"]) + ")" if d["cycle"] else "–")
    elif d["kind"] == "ranking":
        what = " > ".join(d["order"]) if d["order"] else "–"
    else:
        what = "resolved"
    return f"{what} after round {d['after_round']}"


def replay_lines(record: dict[str, Any], record_file: str | None = None) -> list[str]:
    """The summary: decisions adaptive vs fixed and the session share first, then each decision
    made (up to :data:`MAX_DECISION_LINES`), the undecided ones counted, failure-rate warnings,
    and where the record is."""
    decisions = record["decisions"]
    made = sum(d["decided"] for d in decisions)
    share = session_share(record["sessions_run"], record["sessions_fixed"])
    lines = [
        f"adaptive replay ({record['spec']['decide']}): {record['status']} after {len(record['rounds'])} round(s)",
        f"  adaptive design: {made} of {len(decisions)} decisions with {record['sessions_run']:,} of "
        f"{record['sessions_fixed']:,} sessions ({share:.0%})",
        f"  fixed design of the same pool: {record['fixed_design']['decided']} of {len(decisions)} decisions",
    ]
    decided = [d for d in decisions if d["decided"]]
    for d in decided[:MAX_DECISION_LINES]:
        lines.append(f"  {d['task']}/{d['knowledge_level']} {d['metric']}: {decision_text(d)}")
    if len(decided) > MAX_DECISION_LINES:
        lines.append(f"  ... and {len(decided) - MAX_DECISION_LINES} more decided (in the record)")
    open_ = [d for d in decisions if not d["decided"]]
    if open_:
        playing = sum(bool(d["in_play"]) for d in open_)
        lines.append(f"  undecided: {len(open_)} ({playing} still in play, {len(open_) - playing} with no outcome "
                     "reachable from the pool's remaining items)")
    for g in record.get("failure_gaps", []):
        lines.append(f"  warning: {g['task']}/{g['knowledge_level']}: failure rates differ ({g['condition_a']} "
                     f"{g['failure_rate_a']:.0%}, {g['condition_b']} {g['failure_rate_b']:.0%}; Fisher p {g['p_fisher']:.3g})")
    lines.append(f"record: {record_file}" if record_file else
                 "record (procedure, pair counts, rounds): --json prints it, --json FILE writes it")
    return [fit(line) for line in lines]


__all__ = ["MAX_DECISION_LINES", "decision_text", "replay_lines"]
