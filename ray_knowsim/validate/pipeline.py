"""Glue: human data + a run folder -> the validation tables (no printing, no writing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ray_knowsim.io.rundir import RunReader
from ray_knowsim.score.store import RunScores
from ray_knowsim.validate import agreement as ag
from ray_knowsim.validate.conditions import DEFAULT_SIM_COLUMNS, METRICS, LevelCuts
from ray_knowsim.validate.coverage import CELL_COLS, IUTagger, LexicalTagger, coverage_summary, coverage_table, tag_texts
from ray_knowsim.validate.knowchat import load_knowchat
from ray_knowsim.validate.knowchat_models import HumanDataset
from ray_knowsim.validate.layout import KnowChatLayout
from ray_knowsim.validate.mapping import Triple, resolve
from ray_knowsim.validate.simdata import aggregate_metrics, item_graphs, iter_turn_texts, open_sim, open_table, session_index


@dataclass
class ValidateOptions:
    human: Path
    sim: Path
    threshold: float = 0.15
    cuts: LevelCuts = field(default_factory=LevelCuts)
    metric_columns: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SIM_COLUMNS))
    sim_map: dict[str, dict[str, list[str]]] | None = None
    simulators: list[str] | None = None  # None: every simulator in the run
    coverage: bool = True
    tagger: IUTagger | None = None
    layout: KnowChatLayout | None = None  # None: the built-in card layout


@dataclass
class ValidationResult:
    tables: dict[str, pd.DataFrame]
    notes: list[str]
    params: dict


def run_validation(opts: ValidateOptions) -> ValidationResult:
    unknown = sorted(set(opts.metric_columns) - set(METRICS))
    if unknown:
        raise ValueError(f"unknown human metric(s) in the metric map: {', '.join(unknown)} (expected {', '.join(METRICS)})")
    human = load_knowchat(opts.human, opts.cuts, opts.layout)
    hframe = human.frame()
    run = open_sim(opts.sim)  # opened once: its sessions, its turns (coverage) and the scores it counts
    sessions = open_table(opts.sim, "sessions", run=run)
    agg = aggregate_metrics(sessions, list(opts.metric_columns.values()), scores=RunScores.load(opts.sim, run))
    if opts.simulators:
        agg = agg[agg["simulator"].isin(opts.simulators)]
    triples = set(map(tuple, agg[["condition", "assistant_model", "assistant_strategy"]].drop_duplicates().itertuples(index=False)))
    mapping, notes = resolve(triples, opts.sim_map)
    sim = ag.sim_cells(agg, mapping, opts.metric_columns)
    hl = ag.human_long(hframe)
    cells = ag.cell_means(hl, sim)
    pairs = ag.pair_table(hl, sim, opts.threshold)
    tables = {
        "human_sessions": hframe.assign(
            question_ids=hframe["question_ids"].map(" ".join), item_ids=hframe["item_ids"].map(" ".join)
        ),
        "cell_means": cells,
        "pairs": pairs,
        "agreement": ag.agreement_table(pairs),
        "spearman": ag.spearman_table(cells),
    }
    notes.insert(
        0,
        f"human: {len(hframe)} sessions, {hframe['prolific_id'].nunique()} participants, "
        f"{len(human.conversations)} conversations; sim: {len(sim)} cells over "
        f"{sim['simulator'].nunique() if len(sim) else 0} simulator(s)",
    )
    if opts.coverage:
        cov, cov_notes = _coverage(human, hframe, opts, run, sessions, mapping)
        notes += cov_notes
        if cov is not None:
            tables["coverage"] = cov
            tables["coverage_summary"] = coverage_summary(cov)
    params = dict(
        human=str(opts.human), sim=str(opts.sim), threshold=opts.threshold,
        level_cuts=opts.cuts.model_dump(), metric_columns=opts.metric_columns,
        simulators=opts.simulators, sim_map=opts.sim_map,
        layout=(opts.layout.name if opts.layout else "knowchat-card"),
    )
    return ValidationResult(tables=tables, notes=notes, params=params)


def _coverage(human: HumanDataset, hframe: pd.DataFrame, opts: ValidateOptions, run: RunReader, sessions,
              mapping: dict[Triple, list[tuple[str, str]]]):
    turns = open_table(opts.sim, "turns", required=False, run=run)
    if turns is None:
        return None, ["coverage: skipped (the run has no turns table)"]
    tagger = opts.tagger or LexicalTagger()
    meta = {(r.arm, r.task, r.prolific_id, r.session): (r.level, r.condition) for r in hframe.itertuples(index=False)}
    linked = [c for c in human.conversations if c.item_ids]
    notes = []
    if len(linked) < len(human.conversations):
        notes.append(f"coverage: {len(human.conversations) - len(linked)} human conversations name no item id (sheet 'questions'), left out")
    index = session_index(sessions)
    if opts.simulators:
        index = index[index["simulator"].isin(opts.simulators)]
    wanted = {(c.task, i) for c in linked for i in c.item_ids} & set(zip(index["task"], index["item_id"]))
    if not wanted:
        return None, notes + ["coverage: skipped (no item is shared by the human conversations and the run)"]
    graphs = item_graphs(sessions, wanted)

    h_sets: dict[tuple, list[frozenset[str]]] = {}
    for c in linked:
        level, condition = meta[(c.arm, c.task, c.prolific_id, c.session)]
        for item in c.item_ids:
            if (c.task, item) in graphs:
                h_sets.setdefault((c.arm, c.task, item, level, condition), []).append(tag_texts(c.texts, graphs[(c.task, item)], tagger))

    s_cells: dict[str, list[tuple]] = {}
    s_item: dict[str, tuple[str, str]] = {}
    for r in index.itertuples(index=False):
        key = (r.task, r.item_id)
        targets = mapping.get((r.condition, r.assistant_model, r.assistant_strategy), [])
        if key in graphs and targets:
            s_cells[r.session_id] = [(r.simulator, arm, r.task, r.item_id, r.knowledge_level, label) for arm, label in targets]
            s_item[r.session_id] = key
    s_tags: dict[str, set[str]] = {sid: set() for sid in s_cells}
    for sids, users, assistants in iter_turn_texts(turns):
        for sid, u, a in zip(sids, users, assistants):
            tags = s_tags.get(sid)
            if tags is not None:
                ius = graphs[s_item[sid]]
                tags |= set(tagger(u or "", ius)) | set(tagger(a or "", ius))
    s_sets: dict[tuple, list[frozenset[str]]] = {}
    for sid, cells in s_cells.items():
        for cell in cells:
            s_sets.setdefault(cell, []).append(frozenset(s_tags[sid]))
    simulators = sorted({k[0] for k in s_sets})
    h_by_sim = {(sim, *k): v for sim in simulators for k, v in h_sets.items()}
    table = coverage_table(h_by_sim, s_sets)
    if list(table.columns[: len(CELL_COLS)]) != CELL_COLS:
        raise RuntimeError(f"coverage table columns {list(table.columns)} do not start with {CELL_COLS}")
    return table, notes
