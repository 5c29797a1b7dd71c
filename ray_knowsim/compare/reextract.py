"""Re-extraction: another run's extractor labels the reference run's OWN exchanges.

Two runs under different learner models share few exchanges word for word (usually turn 1), so
pairing the labels the runs recorded says little about the extractors. Here the second run's
extractor (its model entry, settings and prompt set, from its recorded config) is asked about
every exchange of the reference's structured sessions, as the reference's extractor was: the same
renderer and parser (:mod:`ray_knowsim.score.relabel`), the session's recorded IU graph, the
learner's state before the exchange (the session's initial state, then each turn's post-turn
state), the conversation before it, and the run's request seed and id for that turn. The labels
are then compared with the reference's recorded ones over ALL its exchanges.

Resumable and costed: ``OUT/re_extraction/<run>/extractor_answers.parquet`` holds one row per
(session, turn); a rerun asks only what has no row or an error row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import item_key
from ray_knowsim.score.relabel import Exchange, label_of, model_identity, relabel, spend
from ray_knowsim.score.transcripts import (RECORD_SESSION_COLUMNS, RECORD_TURN_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS,
                                           Transcript, transcripts_from_tables)
from ray_knowsim.sim.types import request_id, request_seed

KEY_COLUMNS = ("session_id", "turn")
ANSWERS_FILE = "extractor_answers.parquet"


@dataclass
class ReExtraction:
    run: str  # the label of the run whose extractor answered
    extractor: str  # its model key
    answers: pd.DataFrame  # one row per (session, turn) of the reference
    pairs: list[tuple[str, str, str, str, str]]  # (task, item, IU, re-extracted label, reference label)
    asked: int
    spend: dict[str, Any] = field(default_factory=dict)


def reference_exchanges(transcripts: list[Transcript], graphs: dict[str, IUGraph]) -> tuple[list[Exchange], dict]:
    """(one exchange per tutor reply of the structured sessions, (session, turn) -> (task, item, {IU: label})
    the reference's own labels)."""
    exchanges, recorded = [], {}
    for t in transcripts:
        if not t.structured or not t.turn_signals:
            continue
        graph = _graph(t.graph_json) or graphs.get(item_key(t.task, t.item_id))
        if graph is None:
            continue
        for turn, signals in enumerate(t.turn_signals, start=1):
            labels = _labels(signals)
            (_, user), (_, reply) = t.messages[2 * turn - 2], t.messages[2 * turn - 1]
            before = t.initial_states if turn == 1 else t.turn_states[turn - 2]
            if not labels or len(before) != len(graph.nodes):
                continue  # no labels recorded (a replayed turn), or no state to show: nothing to compare
            exchanges.append(Exchange(key=(t.session_id, turn), item=t.item, graph=graph, states=list(before),
                                      prior=t.messages[:2 * turn - 2], user=user, reply=reply,
                                      seed=request_seed(t.seed, "extractor", turn), request_id=request_id(t.session_id, "extractor", turn)))  # fmt: skip
            recorded[(t.session_id, turn)] = (t.task, str(t.item_id), labels)
    return exchanges, recorded


def _graph(graph_json: str) -> IUGraph | None:
    try:
        return IUGraph.model_validate(json.loads(graph_json)) if graph_json else None
    except (ValueError, TypeError):
        return None


def _labels(signals_json: str) -> dict[str, str]:
    try:
        entries = json.loads(signals_json or "[]")
    except ValueError:
        return {}
    return {str(e["id"]): label_of(e.get("teaching_quality")) for e in entries if isinstance(e, dict) and e.get("id")}


def read_reference(path: str | Path, items: dict) -> list[Transcript]:  # noqa: ANN001
    from ray_knowsim.io.rundir import open_run

    run = open_run(path)
    if run.turns is None:
        return []
    sessions = run.sessions.read(SESSION_COLUMNS + RECORD_SESSION_COLUMNS)
    turns = run.turns.read(TURN_COLUMNS + RECORD_TURN_COLUMNS)
    return transcripts_from_tables(sessions, turns, items)


def re_extract(reference: str | Path, run: str | Path, label: str, out_dir: str | Path, *,
               address: str | None = None) -> ReExtraction:
    """``run``'s extractor (from its recorded config) labels every exchange of ``reference``."""
    from ray_knowsim.run.extractor import extractor_model, recorded_config
    from ray_knowsim.plan.sessions import load_inputs
    from ray_knowsim.score.run_stage import _entry_json

    cfg = recorded_config(run)
    key = cfg.roles.extractor.model
    if not key or key not in cfg.models:
        raise ValueError(f"{run}: its recorded config names no extractor model (roles.extractor)")
    inputs = load_inputs(cfg)
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    exchanges, recorded = reference_exchanges(read_reference(reference, items), inputs.graphs)
    entry = cfg.models[key]
    with extractor_model(cfg, key, inputs.graphs, unit="re-extraction", address=address) as model:
        done = relabel(exchanges, key_columns=KEY_COLUMNS, path=Path(out_dir) / label / ANSWERS_FILE, model=model,
                       model_key=key, model_identity=model_identity(entry.backend, _entry_json(entry)),
                       settings=cfg.roles.settings("extractor"), price=getattr(entry, "price", None),
                       prompts=cfg.prompts.version)  # fmt: skip
    pairs = []
    for sid, turn, labels_json, error in done.answers[[*KEY_COLUMNS, "labels_json", "error"]].itertuples(index=False, name=None):
        if error is not None and not pd.isna(error) or (sid, int(turn)) not in recorded:
            continue  # an unreadable answer: left out of the agreement, counted in spend's errors
        task, item, ref_labels = recorded[(sid, int(turn))]
        mine = json.loads(labels_json)
        pairs += [(task, item, iu, mine[iu], ref) for iu, ref in ref_labels.items() if iu in mine]
    return ReExtraction(label, key, done.answers, pairs, done.asked, spend(done.answers))


__all__ = ["ANSWERS_FILE", "KEY_COLUMNS", "ReExtraction", "re_extract", "read_reference", "reference_exchanges"]
