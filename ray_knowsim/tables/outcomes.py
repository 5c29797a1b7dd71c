"""Failed sessions by error kind, and truncated answers by role: the run's ``tables/failures`` and
``tables/truncations`` (Parquet + CSV), counted ONCE here for every surface that shows them (the
run's tables and its final line, the report, the viewer).

Why a table of its own: a failure rate says how many sessions a mean leaves out, not why. A run
whose 168 sessions all failed with ``assistant_http_404`` (a wrong model name) must say so on every
page, per condition (a verbose tutor truncates, a terse one does not), and with the failure's own
words (``error_detail``: "HTTP 404: The model `gpt-x` does not exist"), not only in a Parquet column.

* ``failures``: one row per (task, condition, knowledge_level, error_kind) with a failed session:
  ``n_failed``, the cell's ``n_sessions`` and ``share`` (of the cell's sessions), the
  ``failure_class`` (``infra`` / ``model``, :func:`ray_knowsim.schema.failures.failure_class`), and
  ``example``: the reason of the first such session read (its ``error_detail``, bounded).
  ``error_kind`` is :func:`ray_knowsim.schema.failures.error_kind` of the row's error.
* ``truncations``: one row per (task, condition, knowledge_level): ``n_sessions``, the total
  ``llm_truncations`` and one ``llm_truncations_<role>`` per simulation role, every session counted
  (a truncation is the model's answer, whether the session then failed or not). ``unattributed``:
  truncations of rows written before the per-role columns existed (total minus the roles' sum).

Read from the run's counted session rows (io/rundir.py) with pyarrow, a few columns, in batches (no
Ray Data groupby: the cells are few and the failed rows are what is iterated).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ray_knowsim.io.rundir import CommittedTable
from ray_knowsim.schema.failures import bounded_detail, error_kind, error_text, session_failure_class
from ray_knowsim.schema.results import TRUNCATION_ROLES, truncation_column

KEYS: tuple[str, ...] = ("task", "condition", "knowledge_level")
TRUNCATION_COLUMNS: tuple[str, ...] = tuple(truncation_column(r) for r in TRUNCATION_ROLES)
READ: tuple[str, ...] = (*KEYS, "status", "error", "error_detail", "failure_class", "llm_truncations", *TRUNCATION_COLUMNS)
#: characters of the example reason a failures row keeps (the row itself keeps up to ERROR_DETAIL_CHARS)
EXAMPLE_CHARS = 240
FAILURE_TABLE_COLUMNS = (*KEYS, "error_kind", "failure_class", "n_failed", "n_sessions", "share", "example")
UNKNOWN_KIND = "failed"  # a failed row without an error text (should not happen; counted, not dropped)

Cell = tuple[str, str, str]


@dataclass
class OutcomeCounter:
    """Counts built one batch of session rows at a time (memory: cells x kinds, not rows)."""

    sessions: Counter = field(default_factory=Counter)  # cell -> sessions
    failed: Counter = field(default_factory=Counter)  # (cell, kind, class) -> failed sessions
    examples: dict[tuple[Cell, str], str] = field(default_factory=dict)  # (cell, kind) -> first reason seen
    truncated: dict[Cell, Counter] = field(default_factory=dict)  # cell -> column -> truncated answers

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0:
            return
        names = set(batch.schema.names)
        cols = {k: _strings(batch, k) for k in KEYS}
        cells = list(zip(cols["task"], cols["condition"], cols["knowledge_level"]))
        self.sessions.update(cells)
        for column in ("llm_truncations", *TRUNCATION_COLUMNS):
            if column not in names:
                continue
            values = pc.fill_null(pc.cast(batch.column(column), pa.int64()), 0).to_pylist()
            for cell, n in zip(cells, values):
                if n:
                    self.truncated.setdefault(cell, Counter())[column] += int(n)
        status = batch.column("status").to_pylist()
        failed_rows = [k for k, s in enumerate(status) if s != "ok"]
        if not failed_rows:
            return
        errors = batch.column("error").to_pylist() if "error" in names else [None] * batch.num_rows
        details = batch.column("error_detail").to_pylist() if "error_detail" in names else [None] * batch.num_rows
        classes = batch.column("failure_class").to_pylist() if "failure_class" in names else [None] * batch.num_rows
        for k in failed_rows:
            kind = error_kind(errors[k]) or UNKNOWN_KIND
            cls = session_failure_class(classes[k], errors[k])
            self.failed[(cells[k], kind, cls)] += 1
            key = (cells[k], kind)
            if key not in self.examples:
                reason = bounded_detail(error_text(errors[k], details[k]), EXAMPLE_CHARS)
                if reason:
                    self.examples[key] = reason

    def failures(self, keys: Sequence[str] = KEYS) -> pd.DataFrame:
        """One row per (``keys``, error kind) with a failed session; ``keys`` a prefix-free subset
        of :data:`KEYS` (``("task", "condition")``: the levels summed). ``share``: of the group's
        sessions, every one counted."""
        pick = [KEYS.index(k) for k in keys]
        sessions: Counter = Counter()
        for cell, n in self.sessions.items():
            sessions[tuple(cell[i] for i in pick)] += n
        failed: Counter = Counter()
        classes: dict[tuple, str] = {}
        examples: dict[tuple, str] = {}
        for (cell, kind, cls), n in self.failed.items():
            key = (tuple(cell[i] for i in pick), kind)
            failed[key] += n
            classes.setdefault(key, cls)
            if key not in examples and (cell, kind) in self.examples:
                examples[key] = self.examples[(cell, kind)]
        rows = []
        for (group, kind), n in failed.items():
            total = sessions[group]
            rows.append({**dict(zip(keys, group)), "error_kind": kind, "failure_class": classes[(group, kind)],
                         "n_failed": int(n), "n_sessions": int(total), "share": n / total if total else float("nan"),
                         "example": examples.get((group, kind), "")})
        df = pd.DataFrame(rows, columns=[*keys, *FAILURE_TABLE_COLUMNS[len(KEYS):]])
        return _sorted(df, ["n_failed"])

    def by_class(self, keys: Sequence[str] = KEYS) -> dict[tuple, tuple[int, Counter]]:
        """Per group of ``keys`` (a subset of :data:`KEYS`, values in that order): its sessions and
        its failed sessions per failure class (every failed session has one)."""
        pick = [KEYS.index(k) for k in keys]
        out: dict[tuple, tuple[int, Counter]] = {}
        for cell, n in self.sessions.items():
            group = tuple(cell[i] for i in pick)
            total, classes = out.get(group, (0, Counter()))
            out[group] = (total + n, classes)
        for (cell, _kind, cls), n in self.failed.items():
            out[tuple(cell[i] for i in pick)][1][cls] += n
        return out

    def truncations(self) -> pd.DataFrame:
        rows = []
        for cell, n in self.sessions.items():
            got = self.truncated.get(cell, Counter())
            per_role = {c: int(got.get(c, 0)) for c in TRUNCATION_COLUMNS}
            total = int(got.get("llm_truncations", 0))
            rows.append({**dict(zip(KEYS, cell)), "n_sessions": int(n), "llm_truncations": total, **per_role,
                         "unattributed": max(0, total - sum(per_role.values()))})
        df = pd.DataFrame(rows, columns=[*KEYS, "n_sessions", "llm_truncations", *TRUNCATION_COLUMNS, "unattributed"])
        return _sorted(df, [])


def _strings(batch: pa.RecordBatch | pa.Table, name: str) -> list[str]:
    if name not in batch.schema.names:
        return [""] * batch.num_rows
    return ["" if v is None else str(v) for v in batch.column(name).to_pylist()]


def _sorted(df: pd.DataFrame, most_first: Sequence[str]) -> pd.DataFrame:
    """Rows by task and condition, the most frequent first within them, then level and kind."""
    if df.empty:
        return df.reset_index(drop=True)
    keys = [*(k for k in ("task", "condition") if k in df.columns), *most_first,
            *(k for k in ("knowledge_level", "error_kind") if k in df.columns)]
    ascending = [k not in most_first for k in keys]
    return df.sort_values(keys, ascending=ascending, kind="stable").reset_index(drop=True)


def count_outcomes(batches: Iterable[pa.RecordBatch | pa.Table]) -> OutcomeCounter:
    """THE count of failures by kind and truncations by role over session rows (any batches that
    carry the :data:`READ` columns present in the run)."""
    counter = OutcomeCounter()
    for batch in batches:
        counter.add(batch)
    return counter


def outcome_tables(sessions: CommittedTable) -> dict[str, pd.DataFrame]:
    """``{"failures": ..., "truncations": ...}`` of a run's counted session rows."""
    counter = count_outcomes(sessions.scan(READ))
    return {"failures": counter.failures(), "truncations": counter.truncations()}


# ----------------------------------------------------------------------------- views of the tables


def by_kind(failures: pd.DataFrame) -> list[tuple[str, int, dict[str, int]]]:
    """(error kind, failed sessions, {condition: failed}) over the whole run, the most frequent first."""
    if failures.empty:
        return []
    out = []
    for kind, g in failures.groupby("error_kind", sort=False):
        per = g.groupby("condition")["n_failed"].sum().sort_values(ascending=False, kind="stable")
        out.append((str(kind), int(g["n_failed"].sum()), {str(c): int(n) for c, n in per.items()}))
    return sorted(out, key=lambda r: (-r[1], r[0]))


def kinds_text(failures: pd.DataFrame | None, max_kinds: int = 3, max_conditions: int = 4) -> str:
    """The failed sessions by kind and condition on one line (the run's final line), e.g.
    ``assistant_http_404 168 (a 42, b 42, c 42, d 42)``; "" when none failed."""
    if failures is None or failures.empty:
        return ""
    parts = []
    kinds = by_kind(failures)
    for kind, n, per in kinds[:max_kinds]:
        shown = [f"{c} {k}" for c, k in list(per.items())[:max_conditions]]
        more = len(per) - max_conditions
        parts.append(f"{kind} {n} ({', '.join(shown)}{f', +{more} more' if more > 0 else ''})")
    if len(kinds) > max_kinds:
        parts.append(f"+{len(kinds) - max_kinds} more kinds")
    return "; ".join(parts)


def truncations_by_role(truncations: pd.DataFrame, keys: Sequence[str] = ("task", "condition")) -> pd.DataFrame:
    """The truncations table summed over the levels: per (``keys``) the sessions, the total and
    each role's truncated answers."""
    cols = ["n_sessions", "llm_truncations", *TRUNCATION_COLUMNS, "unattributed"]
    if truncations.empty:
        return pd.DataFrame(columns=[*keys, *cols])
    return truncations.groupby(list(keys), as_index=False, sort=True)[cols].sum()


def role_totals(truncations: pd.DataFrame) -> dict[str, int]:
    """Truncated answers over the whole run per role (plus ``unattributed`` when any)."""
    if truncations.empty:
        return {}
    out = {role: int(truncations[truncation_column(role)].sum()) for role in TRUNCATION_ROLES}
    if int(truncations["unattributed"].sum()):
        out["unattributed"] = int(truncations["unattributed"].sum())
    return out


__all__ = [
    "EXAMPLE_CHARS", "KEYS", "READ", "TRUNCATION_COLUMNS", "OutcomeCounter", "by_kind", "count_outcomes",
    "kinds_text", "outcome_tables", "role_totals", "truncations_by_role",
]  # fmt: skip
