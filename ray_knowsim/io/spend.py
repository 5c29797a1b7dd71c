"""``RUN_DIR/spend/``: the spend journals — every model request a run makes, written as it is answered.

A session's row records what it spent, but only a committed session has a row: a session cut off
by Ctrl-C, a killed driver or a lost worker spent requests no row keeps, and a failed session
rerun later leaves its first attempt's row superseded. So cost is not read from rows alone.
Every shard task (and every scoring pass) appends to a journal of its own, one JSON line per
event, written with one ``write`` to a file opened for appending — the line is in the operating
system's hands before the answer is used, so even ``kill -9`` of the process loses none, and the
journal is fsynced with each commit::

    spend/<unit>.<token>.jsonl       unit: the shard id, or "score-<set>" for a scoring pass
    {"journal": 1, "unit": …, "kind": "shard"|"score", "score_set": …, "config_hash": …,
     "invocation": 0, "pid": …, "started_at": …}                       the header (first line)
    {"sent": "<session id>", "role": "assistant"}                       a request left
    {"s": "<session id>", "role": …, "model": "<model key>", "calls": 1, "cache_hits": 0,
     "errors": 0, "attempts": 1, "prompt": …, "completion": …, "cached_prompt": …,
     "cache_write": …, "reasoning": …, "usd": 0.0012}                   its answer (usd null: unpriced)
    {"committed": ["<session id>", …]}                                  those sessions were committed

``calls`` counts as a session row's ``llm_calls`` does (answers from a model: cache hits and
failed transport calls excluded); ``attempts`` the HTTP requests it took (transport retries).

**Which spend a row holds**: a commit (and a score marker) names the journal its sessions were
spent in (``summary.spend_journal``), so the spend of a session in a journal is in the tables'
rows exactly when the session's counted row came from a commit naming that journal. The rest is
**apart**: ``uncommitted`` (cut off before any commit of it), ``superseded`` (committed, then
replaced by a rerun's row), ``other_score_sets`` (judged into a score set the tables do not
show), ``checks`` (the short chat requests of the checks before spending, preflight/checks.py:
the tiny request, the speed probe; journal kind "preflight", no session). The run's whole spend is the rows' spend plus what is apart (:func:`run_spend`); requests
sent whose answer never came (the process died waiting) are counted as ``in_flight``: a provider
may have billed them, no token count is known. "Sent" is when a request leaves the client: a model
that says so (the HTTP client, :func:`ray_knowsim.llm.protocol.request_leaves`) is journaled then,
so requests still waiting for an in-flight slot or a rate grant are not counted.

No Ray here; the writer is used by the shard worker and the scoring stage, the reader by the
cost table and the manifest.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from ray_knowsim.io.commits import new_token
from ray_knowsim.json_exact import loads_as_json
from ray_knowsim.io.parquet import fsync_dir

SPEND = "spend"
JOURNAL_FORMAT = 1
#: the commit (and score marker) summary key naming the journal the sessions were spent in
JOURNAL_KEY = "spend_journal"
#: why spend is not in the tables' rows (see the module docstring)
APART = ("uncommitted", "superseded", "other_score_sets", "checks")
#: a journal line's token fields -> their names in a price's terms (schema/price.py)
UNIT_TOKENS = {"prompt": "prompt_tokens", "cached_prompt": "cached_prompt_tokens", "cache_write": "cache_write_tokens",
               "completion": "completion_tokens", "reasoning": "reasoning_tokens"}


def session_of(request_id: str) -> str:
    """The session a request belongs to: request ids are ``<session id>#<turn>:<role>``
    (:func:`ray_knowsim.sim.types.request_id`); "" for a request of no session."""
    sid, sep, _ = (request_id or "").rpartition("#")
    return sid if sep else ""


def _line(record: dict[str, Any]) -> bytes:
    """One journal line: compact JSON and a newline, the bytes ``json.dumps(separators=(",", ":"))``
    writes. Two lines per request: orjson writes them in ~0.2 us where json took 3-7 us, and for
    what the journal holds (printable ASCII names, ints, None, lists of names, floats in fixed
    notation) its bytes are json's; anything else (an exponent-form or non-finite float, other
    text) is written by json, so every line is what it always was. The check is one loop over the
    values, and a name's verdict is remembered (a session's id and a role recur on every line)."""
    for value in record.values():
        t = type(value)
        if t is str:
            same = _SAME_TEXT.get(value)
            if same is None:
                same = _same_text(value)
            if not same:
                break
        elif t is int:
            if not -(2**63) <= value < 2**64:
                break
        elif t is float:  # Python's repr and orjson agree in fixed notation (repr's range for it)
            if not (value == 0.0 or 1e-4 <= abs(value) < 1e16):
                break
        elif not (value is None or t is bool or (t is list and all(_same_in_orjson(v) for v in value))):
            break
    else:
        return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
    return (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")


#: text -> whether orjson writes it as json does (bounded: cleared when full)
_SAME_TEXT: dict[str, bool] = {}
_SAME_TEXT_MAX = 4096


def _same_text(value: str) -> bool:
    same = value.isascii() and value.isprintable() and '"' not in value and "\\" not in value
    if len(_SAME_TEXT) >= _SAME_TEXT_MAX:
        _SAME_TEXT.clear()
    _SAME_TEXT[value] = same
    return same


def _same_in_orjson(value: Any) -> bool:
    t = type(value)
    if t is str:
        same = _SAME_TEXT.get(value)
        return _same_text(value) if same is None else same
    if t is int:
        return -(2**63) <= value < 2**64
    if t is float:  # Python's repr and orjson agree in fixed notation (repr's range for it)
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    if value is None or t is bool:
        return True
    if t is list:
        return all(_same_in_orjson(v) for v in value)
    return False


class SpendJournal:
    """Appends one shard task's (or scoring pass's) spend to its own journal file."""

    def __init__(self, root: str | Path, *, unit: str, config_hash: str, kind: str = "shard",
                 invocation: int | str = 0, prices: Mapping[str, Any] | None = None, score_set: str | None = None) -> None:
        folder = Path(root) / SPEND
        folder.mkdir(parents=True, exist_ok=True)
        self.token = new_token()
        self.path = folder / f"{unit}.{self.token}.jsonl"
        self.prices = dict(prices or {})
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._write({"journal": JOURNAL_FORMAT, "unit": unit, "kind": kind, "score_set": score_set,
                     "config_hash": config_hash, "invocation": invocation, "pid": os.getpid(),
                     "host": socket.gethostname(), "started_at": time.time()})
        fsync_dir(folder)

    def _write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        os.write(self._fd, _line(record))

    # the SpendSink protocol of llm/accounting.py
    def sent(self, request: Any, model_key: str) -> None:
        self._write({"sent": session_of(request.request_id), "role": request.role})

    def answered(self, request: Any, response: Any, model_key: str) -> None:
        u = response.usage
        spent = u.prompt_tokens or u.completion_tokens
        price = self.prices.get(model_key)
        # a model without a price makes the cost unknown even for an answer that reported no tokens
        # (the rule of sim/cost.session_cost): an unpriced run never reads "$0.0000"
        usd = None if price is None else price.usage_cost(u) if spent else 0.0
        failed = response.error is not None
        self._write({"s": session_of(request.request_id), "role": request.role, "model": model_key,
                     "calls": int(not response.cached and not failed), "cache_hits": int(bool(response.cached)),
                     "errors": int(failed), "attempts": 0 if response.cached else int(response.attempts),
                     "prompt": u.prompt_tokens, "completion": u.completion_tokens,
                     "cached_prompt": u.cached_prompt_tokens, "cache_write": u.cache_write_tokens, "reasoning": u.reasoning_tokens,
                     "usd": usd})

    def spent(self, *, role: str, model_key: str, requests: int, prompt: int, completion: int, cached: int = 0) -> None:
        """Requests of no session (the checks before spending: their probes), answered."""
        price = self.prices.get(model_key)
        usd = price.cost(prompt, completion, cached) if price is not None and (prompt or completion) else (
            0.0 if not (prompt or completion) else None)
        self._write({"s": "", "role": role, "model": model_key, "calls": requests, "cache_hits": 0, "errors": 0,
                     "attempts": requests, "prompt": prompt, "completion": completion, "cached_prompt": cached, "reasoning": 0,
                     "usd": usd})

    def committed(self, session_ids: Iterable[str]) -> None:
        """Note that these sessions were committed (then superseded spend is told from cut-off
        spend), and make the journal durable with the commit."""
        self._write({"committed": sorted(session_ids)})
        self.sync()

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


# ----------------------------------------------------------------------------- reading


@dataclass
class Spend:
    """Additive spend figures, in total and per role."""

    requests: int = 0  # answers from a model (as a session row's llm_calls)
    cache_hits: int = 0
    errors: int = 0  # requests that failed in transport (after the client's retries)
    attempts: int = 0  # HTTP requests sent, transport retries included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0  # of prompt_tokens, written into the provider's cache (journals before it: 0)
    reasoning_tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0  # answers of a model without a price (then usd is unknown)
    sessions: set[str] = field(default_factory=set)
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)  # role -> requests/prompt/completion/cached
    #: role -> model key -> tokens in the price's terms (:data:`UNIT_TOKENS`): what prices the run's
    #: re-estimate while it runs (run/cost_watch.py); not in :meth:`to_dict` (the manifest's format)
    by_model: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    _FIELDS = ("requests", "cache_hits", "errors", "attempts", "prompt_tokens", "completion_tokens",
               "cached_prompt_tokens", "cache_write_tokens", "reasoning_tokens", "usd", "unpriced")

    def add_line(self, line: Mapping[str, Any], session: str) -> None:
        self.requests += int(line.get("calls", 0))
        self.cache_hits += int(line.get("cache_hits", 0))
        self.errors += int(line.get("errors", 0))
        self.attempts += int(line.get("attempts", 0))
        self.prompt_tokens += int(line.get("prompt", 0))
        self.completion_tokens += int(line.get("completion", 0))
        self.cached_prompt_tokens += int(line.get("cached_prompt", 0))
        self.cache_write_tokens += int(line.get("cache_write", 0))
        self.reasoning_tokens += int(line.get("reasoning", 0))
        if line.get("usd") is None:
            self.unpriced += 1
        else:
            self.usd += float(line["usd"])
        self.sessions.add(session)
        role = self.by_role.setdefault(str(line.get("role", "")), {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                                   "cached_prompt_tokens": 0})
        role["requests"] += int(line.get("calls", 0))
        role["prompt_tokens"] += int(line.get("prompt", 0))
        role["completion_tokens"] += int(line.get("completion", 0))
        role["cached_prompt_tokens"] += int(line.get("cached_prompt", 0))
        unit = self.by_model.setdefault(str(line.get("role", "")), {}).setdefault(str(line.get("model", "")),
                                                                                 dict.fromkeys(UNIT_TOKENS.values(), 0))
        for key, name in UNIT_TOKENS.items():
            unit[name] += int(line.get(key, 0))

    def merge(self, other: "Spend") -> "Spend":
        for name in self._FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.sessions |= other.sessions
        for role, counts in other.by_role.items():
            mine = self.by_role.setdefault(role, dict.fromkeys(counts, 0))
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
        for role, models in other.by_model.items():
            for model, counts in models.items():
                mine = self.by_model.setdefault(role, {}).setdefault(model, dict.fromkeys(counts, 0))
                for k, v in counts.items():
                    mine[k] = mine.get(k, 0) + v
        return self

    @property
    def empty(self) -> bool:
        return not (self.requests or self.cache_hits or self.errors or self.prompt_tokens or self.completion_tokens)

    @property
    def cost_usd(self) -> float | None:
        """USD, or None when some answer that spent tokens had no price (unknown, not 0)."""
        return None if self.unpriced else self.usd

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self._FIELDS if name not in ("usd", "unpriced")}
        out.update(cost_usd=None if self.unpriced else round(self.usd, 8), unpriced_answers=self.unpriced,
                   sessions=len(self.sessions), by_role={r: dict(c) for r, c in sorted(self.by_role.items())})
        return out


@dataclass
class Journal:
    """One journal file, read: its header and its spend by session."""

    path: Path
    token: str
    header: dict[str, Any]
    spend: dict[str, Spend] = field(default_factory=dict)  # session id ("" for none) -> its spend here
    sent: int = 0
    answered: int = 0
    committed: set[str] = field(default_factory=set)

    @property
    def kind(self) -> str:
        return str(self.header.get("kind", "shard"))

    @property
    def invocation(self) -> Any:
        return self.header.get("invocation")


def _header(path: Path, line: dict[str, Any]) -> Journal | None:
    """The journal a header line opens; None when the first line is not a journal's header."""
    return Journal(path, path.name[: -len(".jsonl")].rpartition(".")[2], line) if "journal" in line else None


def _take(journal: Journal, line: dict[str, Any]) -> None:
    """One line after the header: an answer's spend, a request sent, or sessions committed."""
    if "s" in line:
        sid = str(line["s"])
        journal.spend.setdefault(sid, Spend()).add_line(line, sid)
        journal.answered += 1
    elif "sent" in line:
        journal.sent += 1
    elif "committed" in line:
        journal.committed.update(str(s) for s in line["committed"])


def _lines(text: str) -> list[dict[str, Any]]:
    out = []
    for raw in text.splitlines():
        try:
            line = loads_as_json(raw)  # json's values; orjson's speed: two lines a request, read by the driver
        except ValueError:
            continue
        if isinstance(line, dict):
            out.append(line)
    return out


def read_journal(path: Path) -> Journal | None:
    """A journal file; lines that cannot be read (the last one, torn by a crash mid-write) are
    skipped; None for a file without its header."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = _lines(text)
    journal = _header(path, lines[0]) if lines else None
    for line in lines[1:] if journal is not None else ():
        _take(journal, line)
    return journal


@dataclass
class _Followed:
    offset: int = 0  # bytes read: up to the end of the last whole line
    journal: Journal | None = None
    refused: bool = False  # its first line is not a journal's header


class JournalFollower:
    """A run's journals read as they grow (the cost re-estimate reads them again and again while
    the run goes): each :meth:`read` parses only the whole lines appended since the last, so a
    reading costs what was spent since, not the run so far. A line still being written (no
    newline yet) waits for the next reading; a file that shrank (replaced) is read afresh. What it
    returns equals :func:`read_journals` of the same files, but for a last line that a crash left
    without its newline (skipped here until it gets one; read there when it parses)."""

    def __init__(self, root: str | Path, config_hash: str | None = None) -> None:
        self.folder = Path(root) / SPEND
        self.config_hash = config_hash
        self._files: dict[Path, _Followed] = {}

    def read(self) -> list[Journal]:
        if not self.folder.is_dir():
            return []
        out = []
        for path in sorted(self.folder.glob("*.jsonl")):
            state = self._follow(path)
            j = state.journal
            if j is not None and (self.config_hash is None or j.header.get("config_hash") == self.config_hash):
                out.append(j)
        return out

    def _follow(self, path: Path) -> _Followed:
        state = self._files.setdefault(path, _Followed())
        try:
            with path.open("rb") as f:
                if f.seek(0, 2) < state.offset:
                    state = self._files[path] = _Followed()  # replaced by a shorter file: read afresh
                f.seek(state.offset)
                chunk = f.read()
        except OSError:
            return state
        end = chunk.rfind(b"\n")
        if state.refused or end < 0:
            return state
        state.offset += end + 1
        lines = _lines(chunk[: end + 1].decode("utf-8", errors="replace"))
        if state.journal is None and lines:
            state.journal = _header(path, lines.pop(0))
            state.refused = state.journal is None
        for line in lines if state.journal is not None else ():
            _take(state.journal, line)
        return state


def read_journals(root: str | Path, config_hash: str | None = None) -> list[Journal]:
    """Every journal of a run directory (of ``config_hash`` only, when given), in name order."""
    folder = Path(root) / SPEND
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        j = read_journal(path)
        if j is not None and (config_hash is None or j.header.get("config_hash") == config_hash):
            out.append(j)
    return out


@dataclass
class RunSpend:
    """A run's whole spend over all its invocations, split into what its rows hold and what not."""

    in_rows: Spend = field(default_factory=Spend)
    apart: dict[str, Spend] = field(default_factory=lambda: {k: Spend() for k in APART})
    in_flight: int = 0  # requests sent whose answer never came (the process died waiting)
    by_invocation: dict[str, Spend] = field(default_factory=dict)
    journals: int = 0

    @property
    def whole(self) -> Spend:
        total = Spend().merge(self.in_rows)
        for part in self.apart.values():
            total.merge(part)
        return total

    @property
    def not_in_rows(self) -> Spend:
        total = Spend()
        for part in self.apart.values():
            total.merge(part)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {"whole": self.whole.to_dict(), "in_rows": self.in_rows.to_dict(),
                "apart": {k: v.to_dict() for k, v in self.apart.items()}, "in_flight": self.in_flight,
                "by_invocation": {k: v.to_dict() for k, v in sorted(self.by_invocation.items())},
                "journals": self.journals}


def run_spend(journals: list[Journal], counted_journal: Mapping[tuple[str, str], str], primary: str | None) -> RunSpend:
    """Split ``journals`` by whether the tables' rows hold their spend. ``counted_journal``:
    (kind, session id) -> the token of the journal the counted row of the session was spent in
    (kind "shard" for the simulation's rows, "score" for the primary score set's, ``primary``;
    see score.spend.counted_journals)."""
    out = RunSpend(journals=len(journals))
    for j in journals:
        kind = j.kind
        shown = kind == "shard" or (kind == "score" and j.header.get("score_set") == primary)
        for sid, spend in j.spend.items():
            if kind == "preflight":  # the checks before spending: requests of no session
                spend.sessions.discard("")
                out.apart["checks"].merge(spend)
            elif shown and counted_journal.get((kind, sid)) == j.token:
                out.in_rows.merge(spend)
            elif not shown:
                out.apart["other_score_sets"].merge(spend)
            elif sid in j.committed:
                out.apart["superseded"].merge(spend)
            else:
                out.apart["uncommitted"].merge(spend)
            out.by_invocation.setdefault(str(j.invocation), Spend()).merge(spend)
        out.in_flight += max(0, j.sent - j.answered)
    return out


__all__ = ["APART", "JOURNAL_FORMAT", "JOURNAL_KEY", "Journal", "RunSpend", "SPEND", "Spend", "SpendJournal",
           "JournalFollower", "read_journal", "read_journals", "run_spend", "session_of"]
