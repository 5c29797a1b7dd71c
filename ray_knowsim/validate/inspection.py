"""`validate --inspect`: load a KnowChat folder and say what was read, per (arm, task).

No statistics and no run folder: this is the check to make first on a new copy of the release.
Each (arm, task) is loaded on its own, so one broken workbook does not hide what the others hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ray_knowsim.validate.conditions import ARMS, LEVELS, LevelCuts
from ray_knowsim.validate.knowchat import KnowChatFormatError, load_pair
from ray_knowsim.validate.knowchat_files import discover_files
from ray_knowsim.validate.knowchat_models import PairReport
from ray_knowsim.validate.layout import KnowChatLayout


@dataclass
class Inspection:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    reports: list[PairReport] = field(default_factory=list)

    @property
    def sessions(self) -> int:
        return sum(r.sessions for r in self.reports)

    def text(self) -> str:
        return "\n".join(self.lines)


def inspect_folder(folder: Path, cuts: LevelCuts, layout: KnowChatLayout, layout_label: str) -> Inspection:
    out = Inspection()
    out.lines.append(f"KnowChat data in {folder} (layout: {layout_label})")
    try:
        pairs, ignored = discover_files(folder, layout)
    except KnowChatFormatError as exc:
        out.problems.append(str(exc))
        return out
    for (arm, task), (jsonl, xlsx) in pairs.items():
        try:
            _, _, report = load_pair(arm, task, jsonl, xlsx, cuts, layout)
        except KnowChatFormatError as exc:
            out.lines.append(f"{arm} / {task}: NOT LOADED")
            out.lines.append(f"  files       {jsonl.relative_to(folder)} + {xlsx.relative_to(folder)}")
            out.lines.append(f"  problem     {exc}")
            out.problems.append(str(exc))
            continue
        out.reports.append(report)
        out.lines += _pair_lines(report, jsonl.relative_to(folder), xlsx.relative_to(folder))
    out.lines += _arm_lines(out.reports)
    if ignored:
        out.lines.append(f"ignored (no arm and task in the name): {', '.join(ignored)}")
    missing = [f"{a}/{t}" for a in ARMS for t in ("math", "expertqa") if (a, t) not in pairs]
    if missing:
        out.lines.append(f"absent: {', '.join(missing)} (the full release has all four)")
    people = sum(len({p for r in out.reports if r.arm == arm for p in r.participants}) for arm in ARMS)
    out.lines.append(
        f"total: {out.sessions} sessions, {people} participants (ids counted per arm), "
        f"{len(out.reports)} of {len(pairs)} (arm, task) pairs loaded"
    )
    return out


def _pair_lines(r: PairReport, jsonl: Path, xlsx: Path) -> list[str]:
    per = r.sessions / len(r.participants) if r.participants else 0.0
    lines = [
        f"{r.arm} / {r.task}: {r.sessions} sessions, {len(r.participants)} participants ({per:.2g} sessions each)",
        f"  files       {jsonl} + {xlsx}",
        "  sheets      " + ", ".join(f"{k} {v}" for k, v in r.sheets.items()),
    ]
    if r.other_sheets:
        lines.append(f"  not read    sheets {', '.join(repr(s) for s in r.other_sheets)}")
    lines.append(
        "  levels      participants "
        + ", ".join(f"{lv} {r.levels.get(lv, 0)} ({r.level_sessions.get(lv, 0)} sessions)" for lv in LEVELS)
        + f"  [prescreening: {r.prescreening}]"
    )
    lines.append("  conditions  " + ", ".join(f"{c} {n}" for c, n in r.conditions.items()))
    lines.append("  ratings     " + "; ".join(f"{m} from {where}" for m, where in r.ratings.items()))
    lines.append(f"  tests       {r.tests}" if r.tests else "  tests       none (not a math workbook)")
    lines.append(f"  questions   {r.questions}")
    if r.iu_labels is not None:
        lines.append(f"  iu labels   {r.iu_labels}")
    lines += [f"  note        {n}" for n in r.notes]
    return lines


def _arm_lines(reports: list[PairReport]) -> list[str]:
    lines = []
    ids: dict[str, set[str]] = {}
    for arm in ARMS:
        by_task = {r.task: set(r.participants) for r in reports if r.arm == arm}
        if not by_task:
            continue
        ids[arm] = set().union(*by_task.values())
        both = set.intersection(*by_task.values()) if len(by_task) > 1 else set()
        parts = ", ".join(f"{t} {len(p)}" for t, p in by_task.items())
        lines.append(
            f"arm {arm}: {len(ids[arm])} participants ({parts}"
            + (f", in both tasks {len(both)}" if len(by_task) > 1 else "") + ")"
        )
    if len(ids) == 2:
        shared = ids[ARMS[0]] & ids[ARMS[1]]
        if shared:
            lines.append(f"note: {len(shared)} id(s) appear in both arms; ids are per arm, so they are not taken as the same person")
    return lines
