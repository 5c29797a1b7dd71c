"""Read the sheets of a KnowChat workbook: participants, per-session rows, test and prescreening
scores, ratings and the question bank.

Why a module: each sheet's rules (how rows are keyed, how item scores sum to a score and a
maximum, how a level and a rating are read, how question references find their rows) are checked
here, with errors naming file, sheet, row and column.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from ray_knowsim.validate.conditions import LevelCuts
from ray_knowsim.validate.knowchat_models import ConversationRecord, LoadContext, ref_text, canon_session
from ray_knowsim.validate.layout import name_key
from ray_knowsim.validate.xlsx import KnowChatFormatError, Sheet, as_number, blank

__all__ = ["RATING_KEYS", "Prescreening", "QuestionBank", "ScoreSheet", "SessionRows", "rating_columns", "rating_value",
           "sheet_participants"]

RATING_KEYS: dict[str, str] = {"DC": "dc", "CO": "co", "IQ": "iq"}


def sheet_participants(sheet: Sheet, ctx: LoadContext) -> set[str]:
    col = sheet.require({"prolific_id": ctx.layout.sheet_columns("background")["prolific_id"]})["prolific_id"]
    return {sheet.text(row, values, col) for row, values in sheet.rows}  # type: ignore[misc]


class SessionRows:
    """Per-session rows of one sheet, keyed (prolific id, session) or, without a session column,
    (prolific id, condition)."""

    def __init__(self, sheet: Sheet, ctx: LoadContext) -> None:
        self.sheet, self.ctx = sheet, ctx
        cols = ctx.layout.sheet_columns(_sheet_key(sheet, ctx))
        self.pid = sheet.require({"prolific_id": cols["prolific_id"]})["prolific_id"]
        self.session = sheet.find(cols["session"])
        self.condition = sheet.find(cols["condition"]) if self.session is None else None
        if self.session is None and self.condition is None:
            sheet.require({"session": cols["session"]})
        self.rows: dict[tuple, tuple[int, dict]] = {}
        for row, values in sheet.rows:
            pid = sheet.text(row, values, self.pid)
            if self.session is not None:
                s = canon_session(values.get(self.session))
                if s is None:
                    raise KnowChatFormatError(f"{sheet.where(row, self.session)}: expected a whole number or an id, got {values.get(self.session)!r}")
            else:
                try:
                    s = ("condition", ctx.layout.condition(ctx.arm, values.get(self.condition)))
                except ValueError as exc:
                    raise KnowChatFormatError(f"{sheet.where(row, self.condition)}: {exc}") from None
            k = (pid, s)
            if k in self.rows:
                raise KnowChatFormatError(
                    f"{sheet.where(row)}: duplicate entry {pid}, {s if not isinstance(s, tuple) else s[1]} (first at row {self.rows[k][0]})"
                )
            self.rows[k] = (row, values)
        self.taken: set[tuple] = set()

    def take(self, rec: ConversationRecord) -> tuple[int, dict] | None:
        k = (rec.prolific_id, rec.session if self.session is not None else ("condition", rec.condition))
        hit = self.rows.get(k)
        if hit is not None:
            self.taken.add(k)
        return hit

    def untaken(self) -> list[int]:
        return [row for k, (row, _) in self.rows.items() if k not in self.taken]

    def check_all_taken(self, jsonl_name: str) -> None:
        for k, (row, _) in self.rows.items():
            if k not in self.taken:
                what = k[1] if not isinstance(k[1], tuple) else k[1][1]
                raise KnowChatFormatError(f"{self.sheet.where(row)}: session {k[0]}/{what} has no conversation in {jsonl_name}")


def _is_sheet(sheet: Sheet, names: list[str]) -> bool:
    return name_key(sheet.name) in {name_key(n) for n in names}


def _sheet_key(sheet: Sheet, ctx: LoadContext) -> str:
    return next(k for k, s in ctx.layout.sheets.items() if _is_sheet(sheet, s.names))


def _norm_header(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


class ScoreSheet:
    """Scores per row: the sum of item columns (max = their number or a max column), or the older
    'score' + 'max score'."""

    def __init__(self, sheet: Sheet, key: str, ctx: LoadContext) -> None:
        self.sheet, self.notes = sheet, []
        cols = ctx.layout.sheet_columns(key)
        pattern = ctx.layout.sheet_item_pattern(key)
        fixed = ctx.layout.sheets[key].max_score
        items = [c for c in sheet.columns if pattern.search(_norm_header(c))]
        items.sort(key=lambda c: (int(m.group()) if (m := re.search(r"\d+", c)) else 0, c))
        for c in items:
            if name_key(c) in sheet.duplicates:
                raise KnowChatFormatError(f"{sheet.where(sheet.header_row)}: column {c!r} appears twice")
        self.items = items
        max_col = sheet.find(cols["max_score"])
        score_col = sheet.find(cols["score"])
        self._scores: dict[int, tuple[float, float]] = {}
        if items:
            blanks = 0
            sums: dict[int, float] = {}
            for row, values in sheet.rows:
                vals = [self._item(row, values, c) for c in items]
                if all(v is None for v in vals):
                    raise KnowChatFormatError(f"{sheet.where(row)}: no item score in {items[0]!r}..{items[-1]!r}")
                blanks += sum(v is None for v in vals)
                sums[row] = sum(v for v in vals if v is not None)
                if max_col is None and fixed is None:
                    for c, v in zip(items, vals):
                        if v is not None and v > 1:
                            raise KnowChatFormatError(
                                f"{sheet.where(row, c)}: item score {v:g} > 1, but the maximum is taken as the number "
                                f"of item columns ({len(items)}); add a 'max score' column or set sheets.{key}.max_score in a layout file"
                            )
            span = f"{items[0]}..{items[-1]}" if len(items) > 1 else items[0]
            tops: dict[int, float] = {}
            if max_col is not None:
                tops = {row: sheet.number(row, values, max_col) for row, values in sheet.rows}  # type: ignore[misc]
                if sheet.rows and all(tops[r] == sums[r] for r in tops) and not all(t == len(items) for t in tops.values()):
                    # a 'total' column that is the item sum in every row is a score, not the maximum
                    self.notes.append(f"{sheet.name!r} column {max_col!r} equals the item sum in every row: read as the score")
                    tops = {}
                    max_col = None
            default_top = fixed if fixed is not None else float(len(items))
            for row, _ in sheet.rows:
                self._scores[row] = self._check(row, sums[row], tops.get(row, default_top), max_col, None)
            self.desc = f"items {span} summed, max " + (f"from column {max_col!r}" if max_col else f"{default_top:g}")
            if blanks:
                self.notes.append(f"{sheet.name!r}: {blanks} blank item cell(s) counted as 0")
        elif score_col is not None and (max_col is not None or fixed is not None):
            for row, values in sheet.rows:
                score = sheet.number(row, values, score_col)
                top = sheet.number(row, values, max_col) if max_col is not None else fixed
                self._scores[row] = self._check(row, score, top, max_col, score_col)  # type: ignore[arg-type]
            self.desc = f"column {score_col!r} of " + (f"column {max_col!r}" if max_col else f"{fixed:g}")
        else:
            if score_col is not None:
                sheet.require({"max_score": cols["max_score"]})  # raises: 'score' without its maximum
            raise KnowChatFormatError(
                f"{sheet.where()}: missing score columns: neither item columns (Q1, Q2, ...) nor {cols['score'][0]!r} with "
                f"{cols['max_score'][0]!r}; header row {sheet.header_row} has: {', '.join(repr(c) for c in sheet.columns) or 'nothing'}"
            )

    def _item(self, row: int, values: dict, col: str) -> float | None:
        v = values.get(col)
        if blank(v):
            return None
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return float(v.strip().lower() == "true")
        num = as_number(v)
        if num is None:
            raise KnowChatFormatError(f"{self.sheet.where(row, col)}: expected an item score (a number), got {v!r}")
        if num < 0:
            raise KnowChatFormatError(f"{self.sheet.where(row, col)}: item score {num:g} is negative")
        return num

    def _check(self, row: int, score: float, top: float, max_col: str | None, score_col: str | None) -> tuple[float, float]:
        if top <= 0:
            raise KnowChatFormatError(f"{self.sheet.where(row, max_col)}: the maximum must be > 0, got {top:g}")
        if not 0 <= score <= top:
            raise KnowChatFormatError(f"{self.sheet.where(row, score_col or (self.items[0] if self.items else None))}: score {score:g} is outside 0..{top:g}")
        return score, top

    def score(self, row: int) -> tuple[float, float]:
        return self._scores[row]

    def where(self, row: int) -> str:
        return self.sheet.where(row)

    def describe(self) -> str:
        return self.desc


class Prescreening:
    """Participant -> level. Several rows for one participant are told apart by a session or a
    topic column, or must give the same fraction."""

    def __init__(self, sheet: Sheet, ctx: LoadContext, cuts: LevelCuts) -> None:
        self.sheet, self.cuts = sheet, cuts
        cols = ctx.layout.sheet_columns("prescreening")
        pid_col = sheet.require({"prolific_id": cols["prolific_id"]})["prolific_id"]
        self.session_col = sheet.find(cols["session"])
        self.topic_col = sheet.find(cols["topic"])
        self.scores = ScoreSheet(sheet, "prescreening", ctx)
        self.by_pid: dict[str, list[tuple[int, object, str | None, float]]] = {}
        for row, values in sheet.rows:
            pid = sheet.text(row, values, pid_col)
            score, top = self.scores.score(row)
            session = canon_session(values.get(self.session_col)) if self.session_col else None
            topic = sheet.text(row, values, self.topic_col, required=False) if self.topic_col else None
            self.by_pid.setdefault(pid, []).append((row, session, topic, score / top))  # type: ignore[arg-type]
        seen: dict[tuple, tuple[int, float]] = {}
        for pid, rows in self.by_pid.items():
            for row, session, topic, fraction in rows:
                k = (pid, session, None if topic is None else name_key(topic))
                if k in seen and seen[k][1] != fraction:
                    raise KnowChatFormatError(
                        f"{sheet.where(row)}: duplicate participant {pid} with a different score (first at row {seen[k][0]})"
                    )
                seen.setdefault(k, (row, fraction))

    def level(self, rec: ConversationRecord, where_main: str) -> tuple[str, float]:
        rows = self.by_pid.get(rec.prolific_id)
        if not rows:
            raise KnowChatFormatError(f"{where_main}: participant {rec.prolific_id} has no {self.sheet.name!r} row")
        fractions = {f for *_, f in rows}
        if len(fractions) > 1:
            pick = [r for r in rows if self.session_col and r[1] == rec.session] or [
                r for r in rows if self.topic_col and r[2] is not None and rec.topic is not None and name_key(r[2]) == name_key(rec.topic)
            ]
            if len({r[3] for r in pick}) != 1:
                raise KnowChatFormatError(
                    f"{self.sheet.where(rows[0][0])}: participant {rec.prolific_id} has {len(rows)} rows with different scores "
                    f"(rows {', '.join(str(r[0]) for r in rows)}) and none is told apart by a session or topic column for session {rec.session}"
                )
            fractions = {pick[0][3]}
        fraction = fractions.pop()
        return self.cuts.level(fraction), fraction

    def participant_levels(self, pids: list[str]) -> dict[str, int]:
        """Participants per level (a participant whose rows differ counts at each level seen)."""
        out: Counter = Counter()
        for pid in pids:
            for lev in {self.cuts.level(f) for *_, f in self.by_pid.get(pid, [])}:
                out[lev] += 1
        return dict(out)


def rating_columns(survey: Sheet, main: Sheet, ctx: LoadContext) -> dict[str, tuple[Sheet, list[str]]]:
    """metric -> (sheet, columns): one column named for the scale, or, where the scale was asked as
    several numbered items ('Delivery Calibration 1', 'dc_2', ...), those columns (their mean)."""
    out: dict[str, tuple[Sheet, list[str]]] = {}
    for metric, key in RATING_KEYS.items():
        for sheet, sheet_key in ((survey, "survey"), (main, "main")):
            names = ctx.layout.sheet_columns(sheet_key)[key]
            col = sheet.find(names)
            if col is not None:
                out[metric] = (sheet, [col])
                break
            stems = {name_key(n) for n in names}
            items = [c for c in sheet.columns if (m := re.fullmatch(r"(.*?)(?:q|item)?\d+", name_key(c))) and m.group(1) in stems]
            if items:
                out[metric] = (sheet, items)
                break
        else:
            raise KnowChatFormatError(
                f"{survey.file.name}: rating column {ctx.layout.columns[key][0]!r} is in neither sheet {survey.name!r} nor sheet {main.name!r}"
            )
    return out


def rating_value(sheet: Sheet, row: int, values: dict, cols: list[str]) -> float | None:
    got = [v for v in (sheet.number(row, values, c, required=False) for c in cols) if v is not None]
    return sum(got) / len(got) if got else None


class QuestionBank:
    def __init__(self, sheet: Sheet | None, ctx: LoadContext) -> None:
        self.sheet, self.ctx = sheet, ctx
        self.ids: dict[str, int] = {}
        self.id_col = self.item_col = None
        if sheet is None:
            return
        self._by_row = dict(sheet.rows)
        cols = ctx.layout.sheet_columns("questions")
        self.id_col = sheet.find(cols["question_id"])
        self.item_col = sheet.find(cols["item_id"])
        if self.id_col is not None:
            for row, values in sheet.rows:
                q = ref_text(values.get(self.id_col))
                if q is None:
                    continue
                if q in self.ids:
                    raise KnowChatFormatError(f"{sheet.where(row, self.id_col)}: duplicate question id {q} (first at row {self.ids[q]})")
                self.ids[q] = row

    def _item(self, row: int) -> str | None:
        if self.sheet is None or self.item_col is None:
            return None
        values = self._by_row[row]
        return self.sheet.text(row, values, self.item_col, required=False)

    def resolve(self, jsonl: Path, records: list[ConversationRecord]) -> tuple[dict[str, str | None], str]:
        """(reference -> item id or None, how references were matched)."""
        refs = [(r.line, q) for r in records for q in r.questions]
        if not refs:
            return {}, "none in the records"
        if self.sheet is None:
            self.ctx.notes.append("records refer to questions but the workbook has no questions sheet: references not used")
            return {}, f"{len(refs)} references, no questions sheet (not used)"
        name = self.sheet.name
        if self.id_col is not None and all(q in self.ids for _, q in refs):
            rows = {q: self.ids[q] for _, q in refs}
            how = f"by column {self.id_col!r}"
        else:
            base = self.ctx.layout.question_index_base
            n = len(self.sheet.rows)
            nums = [as_number(q) for _, q in refs]
            if base == 0 and all(x is not None and x.is_integer() for x in nums) and min(nums) >= 1 and max(nums) == n:  # type: ignore[type-var]
                base = 1  # 1..n cannot be 0-based positions; n can only be the last row counted from 1
                self.ctx.notes.append(f"question references run 1..{n}: read as row positions counted from 1")
            rows = {}
            for line, q in refs:
                num = as_number(q)
                if num is None or not num.is_integer() or not base <= num < base + n:
                    by_id = f"not a {self.id_col!r} in sheet {name!r} and " if self.id_col else ""
                    raise KnowChatFormatError(
                        f"{jsonl.name}, line {line}: question {q!r} is {by_id}not a row index {base}..{base + n - 1} of sheet {name!r}"
                    )
                rows[q] = self.sheet.rows[int(num) - base][0]
            how = f"by row position (first data row = {base})"
        items = {q: self._item(row) for q, row in rows.items()}
        linked = sum(v is not None for v in items.values())
        return items, f"{len(refs)} references to {len(rows)} of {len(self.sheet.rows)} questions, {how}; {linked} with an item id"
