"""Find the KnowChat files in a folder: one JSONL file and one workbook per (arm, task).

Why a module: which files belong to which (arm, task), and which are ignored, is decided from the
file names alone (through the layout's arm and task names), before anything is read.
"""

from __future__ import annotations

import re
from pathlib import Path

from ray_knowsim.validate.conditions import ARMS, TASKS
from ray_knowsim.validate.layout import KnowChatLayout, default_layout, name_key
from ray_knowsim.validate.xlsx import KnowChatFormatError

__all__ = ["discover", "discover_files"]


def _tokens(stem: str) -> set[str]:
    toks = [t for t in re.split(r"[^a-z0-9]+", stem.lower()) if t]
    return set(toks) | {a + b for a, b in zip(toks, toks[1:])}


def _arm_task(path: Path, layout: KnowChatLayout) -> tuple[str, str] | None:
    toks = {name_key(t) for t in _tokens(path.stem)}
    arms = {arm for arm, names in layout.files.arms.items() if toks & {name_key(n) for n in names}}
    tasks = {task for task, names in layout.files.tasks.items() if toks & {name_key(n) for n in names}}
    if not arms and not tasks:
        return None
    if len(arms) != 1 or len(tasks) != 1:
        raise KnowChatFormatError(
            f"{path.name}: the file name must name exactly one arm ({'|'.join(ARMS)}) and one task "
            f"({'|'.join(TASKS)}), e.g. math_strategy_conversations{path.suffix}"
        )
    return arms.pop(), tasks.pop()


def discover_files(folder: Path, layout: KnowChatLayout | None = None) -> tuple[dict[tuple[str, str], tuple[Path, Path]], list[str]]:
    """((arm, task) -> (conversations.jsonl, workbook.xlsx), ignored .jsonl/.xlsx files)."""
    layout = layout or default_layout()
    folder = Path(folder)
    if not folder.is_dir():
        raise KnowChatFormatError(f"{folder}: not a folder")
    found: dict[str, dict[tuple[str, str], Path]] = {".jsonl": {}, ".xlsx": {}}
    ignored: list[str] = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(p.startswith(".") for p in rel.parts) or path.name.startswith("~$") or not path.is_file():
            continue
        if path.suffix.lower() not in found:
            continue
        key = _arm_task(path, layout)
        if key is None:
            ignored.append(str(rel))
            continue
        bucket = found[path.suffix.lower()]
        if key in bucket:
            raise KnowChatFormatError(
                f"{rel} and {bucket[key].relative_to(folder)}: two {path.suffix} files for arm {key[0]!r}, task {key[1]!r}"
            )
        bucket[key] = path
    jsonl, xlsx = found[".jsonl"], found[".xlsx"]
    if not jsonl and not xlsx:
        extra = f" (ignored, naming no arm and task: {', '.join(ignored)})" if ignored else ""
        raise KnowChatFormatError(f"{folder}: no KnowChat .jsonl/.xlsx files found{extra}")
    for key in sorted(set(jsonl) ^ set(xlsx)):
        have = (jsonl.get(key) or xlsx.get(key)).name
        lacking = "workbook (.xlsx)" if key in jsonl else "conversation file (.jsonl)"
        raise KnowChatFormatError(f"{have}: no matching {lacking} for arm {key[0]!r}, task {key[1]!r}")
    order = {(a, t): i for i, (a, t) in enumerate((a, t) for a in ARMS for t in TASKS)}
    return {k: (jsonl[k], xlsx[k]) for k in sorted(jsonl, key=order.__getitem__)}, ignored


def discover(folder: Path, layout: KnowChatLayout | None = None) -> dict[tuple[str, str], tuple[Path, Path]]:
    """(arm, task) -> (conversations.jsonl, workbook.xlsx)."""
    return discover_files(folder, layout)[0]
