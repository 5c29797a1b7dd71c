"""A run's whole spend (io/spend.py's journals) matched to what its rows hold: a session's
simulation spend is counted by its counting commit, its judge spend by the primary score set's
marker. It lives here, above io/, because the score markers are the score store's to read."""

from __future__ import annotations

from typing import Any

from ray_knowsim.io.spend import JOURNAL_KEY, RunSpend, read_journals, run_spend
from ray_knowsim.score.store import ScoreDir, primary_name


def counted_journals(reader: Any, primary: str | None) -> dict[tuple[str, str], str]:
    """(kind, session id) -> the journal token of the session's counted row, from a run's
    reader (io/rundir.py) and its ``primary`` score set."""
    out: dict[tuple[str, str], str] = {}
    if reader.index is None:
        return out
    best = reader.index.counting_commits()
    for sid, commit in best.items():
        token = (commit.summary or {}).get(JOURNAL_KEY)
        if isinstance(token, str):
            out[("shard", sid)] = token
    if primary is not None:
        markers = ScoreDir(reader.root, primary).markers()
        for sid, commit in best.items():
            marker = markers.get(commit.name)
            tokens = (marker.summary or {}).get(JOURNAL_KEY) if marker is not None else None
            if isinstance(tokens, dict) and isinstance(tokens.get(sid), str):
                out[("score", sid)] = tokens[sid]
    return out


def spend_of_run(reader: Any) -> RunSpend | None:
    """The run's :class:`RunSpend` from its reader, or None when it has no journals (a run of
    an earlier release, or a plain layout): then only its rows tell what it spent."""
    if reader.index is None:
        return None
    journals = read_journals(reader.root, reader.config_hash)
    if not journals:
        return None
    primary = primary_name(reader.root)
    return run_spend(journals, counted_journals(reader, primary), primary)


__all__ = ["counted_journals", "spend_of_run"]
