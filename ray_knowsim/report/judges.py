"""The report's judge section: when a run was scored by more than one judge
(``ray-knowsim score RUN_DIR --judge ...``), does the verdict depend on the judge?

Per task, each condition's mean Interaction Quality under every score set, and for each extra set
its agreement with the primary one: Spearman's rho over the sessions both judged, Kendall's tau over
the condition means, and whether both name the same best condition. Pure: it reads the session rows
with the score sets already joined in (:meth:`ray_knowsim.score.store.RunScores.attach`).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import pandas as pd

from ray_knowsim.stats.agreement import kendall_tau
from ray_knowsim.stats.association import spearman

METRIC = "iq"
NOTE = ("Interaction Quality (1-10) of the same conversations under each judge. rho: Spearman over the sessions both "
        "judged; tau: Kendall over the condition means; highest mean: whether both judges give the same condition the "
        "highest mean IQ (–: a tie or no scores) -- a description of means, not a verdict (the verdicts are on the item "
        "win rate, above). "
        "A low tau means the ranking of conditions depends on the judge.")


@dataclass
class Agreement:
    score_set: str
    n_sessions: int  # sessions both the primary and this set scored
    rho: float  # Spearman, per session (NaN: fewer than 3 sessions or no spread)
    tau: float  # Kendall, over condition means (NaN: fewer than 2 conditions)
    same_best: bool | None  # None: a set scored no condition, or its top is tied


@dataclass
class JudgeBlock:
    task: str
    sets: list[str]  # primary first
    means: pd.DataFrame  # index condition, one column per set (mean IQ), plus n_<set>
    agreements: list[Agreement] = field(default_factory=list)


def _column(name: str, primary: str) -> str:
    return METRIC if name == primary else f"{METRIC}@{name}"


def _best(means: pd.Series) -> object | None:
    """The condition with the highest mean; None when there is none or the top is tied."""
    top = means.dropna()
    top = top[top == top.max()] if not top.empty else top
    return top.index[0] if len(top) == 1 else None


def _nan_if_undefined(value: float) -> float:
    return float(value) if value is not None and not math.isnan(value) else math.nan


def condition_means(part: pd.DataFrame, cols: dict[str, str]) -> pd.DataFrame:
    """Each condition's mean IQ under each score set (``cols``: set -> column) and its n
    (``n_<set>``): the numbers of the report's judge table and of `ray-knowsim score`'s summary."""
    grouped = part.groupby("condition", sort=False)
    means = pd.DataFrame({name: grouped[col].mean() for name, col in cols.items()})
    for name, col in cols.items():
        means[f"n_{name}"] = grouped[col].count()
    return means


def score_set_means(sessions: pd.DataFrame, name: str, primary: str | None) -> list[dict]:
    """Per (task, condition), the mean IQ of score set ``name`` and its n over the ok sessions
    (empty when the set holds no IQ, e.g. a review-only set)."""
    col = _column(name, primary or name)
    if col not in sessions.columns:
        return []
    ok = sessions[sessions["status"] == "ok"]
    rows = []
    for task in sorted(ok["task"].dropna().unique()):
        means = condition_means(ok[ok["task"] == task], {name: col})
        rows += [{"task": str(task), "condition": str(cond), METRIC: _nan_if_undefined(r[name]), "n": int(r[f"n_{name}"])}
                 for cond, r in means.iterrows() if r[f"n_{name}"] > 0]
    return rows


def judge_blocks(sessions: pd.DataFrame, primary: str, sets: list[str]) -> list[JudgeBlock]:
    """One block per task; empty unless ``sets`` holds the primary and at least one other set."""
    others = [s for s in sets if s != primary]
    if primary not in sets or not others:
        return []
    ok = sessions[sessions["status"] == "ok"]
    blocks = []
    for task in sorted(ok["task"].dropna().unique()):
        part = ok[ok["task"] == task]
        names = [primary, *others]
        cols = {name: _column(name, primary) for name in names if _column(name, primary) in part.columns}
        if primary not in cols:
            continue
        means = condition_means(part, cols)
        block = JudgeBlock(task=str(task), sets=list(cols), means=means)
        base = means[primary]
        for name in cols:
            if name == primary:
                continue
            both = part[[cols[primary], cols[name]]].dropna()
            rho, _ = spearman(both.iloc[:, 0], both.iloc[:, 1])
            pair = means[[primary, name]].dropna()
            tau = kendall_tau(pair[primary], pair[name])
            first, other = _best(base), _best(means[name])
            same = None if first is None or other is None else first == other
            block.agreements.append(Agreement(name, len(both), _nan_if_undefined(rho), _nan_if_undefined(tau), same))
        blocks.append(block)
    return blocks


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _same(same: bool | None) -> str:
    return "–" if same is None else ("same" if same else "differs")


def _rows(block: JudgeBlock) -> tuple[list[str], list[list[str]]]:
    heads = ["condition", *(f"IQ ({s})" for s in block.sets)]
    rows = [[str(cond), *(f"{_num(r[s])} (n={int(r[f'n_{s}'])})" for s in block.sets)] for cond, r in block.means.iterrows()]
    return heads, rows


def _agreement_line(block: JudgeBlock, a: Agreement) -> str:
    return (f"{a.score_set} vs {block.sets[0]}: rho {_num(a.rho)} over {a.n_sessions} sessions, "
            f"tau {_num(a.tau)} over conditions, highest mean IQ {_same(a.same_best)}")


def judges_html(blocks: list[JudgeBlock]) -> list[str]:
    if not blocks:
        return []
    e = html.escape
    parts = []
    for b in blocks:
        heads, rows = _rows(b)
        num = ' class="num"'
        body = "".join("<tr>" + "".join(f"<td{num if k else ''}>{e(v)}</td>" for k, v in enumerate(r)) + "</tr>" for r in rows)
        lines = "".join(f"<li>{e(_agreement_line(b, a))}</li>" for a in b.agreements)
        parts.append(f"<h3>{e(b.task)}</h3><table><thead><tr>{''.join(f'<th>{e(h)}</th>' for h in heads)}</tr></thead>"
                     f"<tbody>{body}</tbody></table><ul>{lines}</ul>")
    return [f'<section id="judges"><h2>Judges</h2><p class="lead">{e(NOTE)}</p>{"".join(parts)}</section>']


def judges_markdown(blocks: list[JudgeBlock]) -> list[str]:
    if not blocks:
        return []
    out = ["## Judges", "", NOTE, ""]
    for b in blocks:
        heads, rows = _rows(b)
        out += [f"### {b.task}", "", "| " + " | ".join(heads) + " |", "|---|" + "---:|" * (len(heads) - 1)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        out += ["", *(f"- {_agreement_line(b, a)}" for a in b.agreements), ""]
    return out


__all__ = ["Agreement", "JudgeBlock", "condition_means", "judge_blocks", "judges_html", "judges_markdown", "score_set_means"]
