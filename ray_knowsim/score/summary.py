"""What `ray-knowsim score` prints (issue 51): which judges ran, how many conversations were
judged / skipped / failed, the headline score per condition, where the score set is. Pure: the
per-condition means are :func:`ray_knowsim.report.judges.score_set_means` -- the report's judge
table's numbers -- and the review agreement is the table the review pass wrote.
"""

from __future__ import annotations

import math
from typing import Any

from ray_knowsim.text import fit, wrap_items


def score_record(out: Any, *, judges: list[str], primary: bool, where: str, means: list[dict],
                 review: dict | None) -> dict[str, Any]:
    """The JSON record of a :class:`~ray_knowsim.score.run_stage.ScoreOutcome` (its fields as
    `score` printed them before issue 51, plus the judges, the folder and the means)."""
    return {"name": out.name, "judge_model": out.judge_model, "judges": judges, "scored_shards": out.scored_shards,
            "skipped_shards": out.skipped_shards, "sessions": out.n_sessions, "judge_errors": out.n_errors,
            "primary": primary, "score_set": where, "iq_by_condition": means,
            **({"review_agreement": review} if review is not None else {}), "seconds": round(out.seconds, 2)}


def review_record(table: Any) -> dict[str, dict[str, Any]]:
    """The review's agreement with the audit (``tables/review_agreement``'s shared rows) as JSON:
    per kind the counts and Cohen's kappa (None where undefined)."""
    import pandas as pd

    def num(v: Any) -> Any:  # a count or a statistic as JSON
        return None if pd.isna(v) else (int(v) if float(v).is_integer() and not isinstance(v, float) else round(float(v), 3))

    return {r.kind: {"sessions": num(r.n_sessions), "audit": num(r.n_audit), "review": num(r.n_review),
                     "both": num(r.n_both), "kappa": num(r.kappa)}
            for r in table.itertuples(index=False) if r.shared and (r.n_audit or r.n_review or r.kind.startswith("any"))}


def _num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def score_lines(record: dict[str, Any], record_file: str | None = None) -> list[str]:
    """The summary of :func:`score_record`."""
    lines = [f"score set '{record['name']}' (judge {record['judge_model']}; {', '.join(record['judges'])})"
             + (", now the primary set" if record["primary"] else ""),
             f"  {record['sessions']:,} conversations judged in {record['scored_shards']} shard(s); "
             f"{record['skipped_shards']} shard(s) already scored, skipped; {record['judge_errors']:,} judge error(s)"]
    tasks = sorted({m["task"] for m in record["iq_by_condition"]})
    for task in tasks:
        rows = [m for m in record["iq_by_condition"] if m["task"] == task]
        lines += wrap_items(f"  mean IQ by condition{f' ({task})' if len(tasks) > 1 else ''}:",
                            [f"{m['condition']} {_num(m['iq'])} (n {m['n']})" for m in rows])
    for kind, r in (record.get("review_agreement") or {}).items():
        lines.append(f"  review vs audit, {kind}: kappa {_num(r['kappa'])} over {r['sessions']} sessions "
                     f"(audit {r['audit']}, review {r['review']}, both {r['both']})")
    lines.append(f"written to {record['score_set']}")
    if record_file:
        lines.append(f"record: {record_file}")
    return [fit(line) for line in lines]


__all__ = ["review_record", "score_lines", "score_record"]
