"""Score a run directory: the judges as a stage over its commits, resumable like a run.

``run`` calls :func:`score_run` after the simulation with the config's judge; ``ray-knowsim
score RUN_DIR --judge ...`` calls it later with another judge into another score set. The unit is
a simulation commit (usually one per shard: a shard folds its small commits when it ends), read
through the run's reader (io/rundir.py), so only the rows it counts are judged. A few commits
are judged at once on the driver (their requests go through the judge model's client, so its
limiter or engine pool batches them), each committed on its own (``scores/<name>/``) as soon as it
is done, so an interrupted pass resumes where it stopped; commits whose scores are committed are
skipped.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml
from pydantic import ValidationError

from ray_knowsim.io.yamltext import load_yaml
from ray_knowsim.config import RunConfig
from ray_knowsim.config.base import ConfigError, format_errors
from ray_knowsim.config.model_entries import answer_fields, validate_model_entries
from ray_knowsim.backends.model_set import ModelSet, build_models, shutdown_pools
from ray_knowsim.plan.build import model_prices
from ray_knowsim.plan.sessions import load_inputs
from ray_knowsim.io.commits import Commit, RunDir, read_commit_tables
from ray_knowsim.io.rundir import RunDirError, RunReader
from ray_knowsim.io.spend import JOURNAL_KEY, SpendJournal
from ray_knowsim.llm.accounting import Accounting
from ray_knowsim.score.judges import DEFAULT_JUDGES, JUDGES
from ray_knowsim.score.stage import judge_transcripts
from ray_knowsim.score.store import ScoreDir, ScoreMarker
from ray_knowsim.score.transcripts import (
    RECORD_SESSION_COLUMNS, RECORD_TURN_COLUMNS, SESSION_COLUMNS, TURN_COLUMNS, transcripts_from_tables,
)
from ray_knowsim.sim.types import RoleSettings, item_key


class ScoreError(RuntimeError):
    """Scoring cannot start (no such judge model, no committed shards, a bad judge file)."""


@dataclass
class ScoreOutcome:
    name: str
    judge_model: str
    committed: list[ScoreMarker] = field(default_factory=list)  # the commits judged by this call
    skipped_shards: int = 0  # commits scored before and left alone
    llm: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def scored_shards(self) -> int:
        return len(self.committed)

    @property
    def n_sessions(self) -> int:
        return sum(m.n_sessions for m in self.committed)

    @property
    def n_errors(self) -> int:
        return sum(m.n_errors for m in self.committed)


def resolve_judge(cfg: RunConfig, judge: str | None, *, flag: str = "--judge") -> tuple[RunConfig, str]:
    """(config holding the judge model, its key). ``judge``: a model key of the run's config, a
    YAML/JSON file holding ONE model entry (``{backend: ..., ...}``; its key is the file stem), or
    None for the config's own ``roles.judge``. ``flag``: the option named in errors (the same
    resolution serves ``validate --extractor``)."""
    if judge is None:
        if cfg.roles.judge is None or not cfg.roles.judge.model:
            raise ScoreError("the run config has no judge (roles.judge); name one with --judge MODEL_KEY_OR_FILE")
        return cfg, cfg.roles.judge.model
    if judge in cfg.models:
        return cfg, judge
    path = Path(judge)
    if not path.is_file():
        raise ScoreError(f"{flag} {judge!r}: neither a model key of the run ({sorted(cfg.models)}) nor a file")
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except yaml.YAMLError as exc:
        raise ConfigError([f"not valid YAML: {exc}"], str(path)) from None
    key = path.stem
    try:
        entries = validate_model_entries({key: raw})
    except ValidationError as exc:
        raise ConfigError(format_errors(exc), str(path)) from exc
    if key in cfg.models and _entry_json(cfg.models[key]) != _entry_json(entries[key]):
        raise ScoreError(f"{flag} {judge}: the file's name {key!r} is a model key of the run with another entry; "
                         "rename the file")
    merged = cfg.model_copy(update={"models": {**cfg.models, key: entries[key]}})
    return merged, key


def _entry_json(entry: Any) -> str:
    """What makes a model entry answer as it does: its fields but the operational ones (timeouts,
    limits, price: they change how it is reached or what it costs, as for the run's config hash)."""
    return _identity(entry.backend, entry.model_dump(mode="json"))


def _identity(backend: str, dumped: dict[str, Any]) -> str:
    return json.dumps(answer_fields({**dumped, "backend": backend}), sort_keys=True)


def _check_same_judge(store: ScoreDir, info: dict[str, Any], has_scores: bool) -> None:
    """A score set holds one judge's scores: committed shards are skipped, so judging into a set
    made by another model or other judges would mislabel them."""
    old = store.info()
    if not old or not has_scores:
        return
    same = (old.get("judge_model"), _identity(old.get("backend", ""), old.get("entry") or {}), old.get("judges")) == (
        info["judge_model"], _identity(info["backend"], info["entry"]), info["judges"])
    if not same:
        raise ScoreError(f"score set {store.name!r} holds scores of {old.get('judge_model')!r} ({old.get('backend')}) "
                         f"with judges {old.get('judges')}; name another set with --name")


def judge_settings(cfg: RunConfig) -> RoleSettings:
    """How the judge is asked: the run config's ``roles.judge``, or the spec's defaults."""
    return cfg.roles.settings("judge")


def score_run(
    cfg: RunConfig,
    run_dir: str | Path,
    *,
    judge: str | None = None,
    name: str | None = None,
    judges: Sequence[str] = DEFAULT_JUDGES,
    models: ModelSet | None = None,
    inputs: Any = None,
    pools: dict[str, Any] | None = None,
    shard_concurrency: int = 4,
    config_hash: str | None = None,
    reader: RunReader | None = None,
    invocation: int | str = "score",
) -> ScoreOutcome:
    """Judge every committed shard of ``run_dir`` not yet scored under ``name`` (default: the
    judge's model key). Ray must be running when the judge's backend starts actors.

    ``shard_concurrency`` shards are judged at once (their requests share the judge model's client,
    so its limiter or engine pool sees them together); each shard commits as soon as it is done.
    ``reader``: the run directory's commits when the caller has just read them (``run`` has).
    ``invocation``: the run's invocation this pass belongs to (its spend journal says so; a
    ``score`` command's own pass: "score").
    """
    t0 = time.perf_counter()
    # of the run itself (a judge from a file is not part of it); ``run`` passes the one it computed,
    # as hashing digests every input file
    config_hash = config_hash or cfg.config_hash()
    cfg, key = resolve_judge(cfg, judge)
    unknown = [j for j in judges if j not in JUDGES]  # an error before any work
    if unknown:
        raise ScoreError(f"unknown judge(s) {unknown}; registered: {JUDGES.names()} "
                         "(a judge of a plugin module: --plugin MODULE)")
    name = name or key
    rd = RunDir(run_dir)
    if reader is None:
        try:
            reader = RunReader.open(rd.root, config_hash)
        except RunDirError as exc:
            raise ScoreError(str(exc)) from exc
    commits = {c.name: c for c in (reader.index.live() if reader.index is not None else [])}
    if not commits:
        raise ScoreError(f"{rd.root}: no committed sessions of this config to score")
    store = ScoreDir(rd.root, name)
    entry = cfg.models[key]
    info = {"name": name, "judge_model": key, "backend": entry.backend,
            "entry": entry.model_dump(mode="json"), "judges": list(judges)}
    store.collect_garbage()  # score files an interrupted earlier pass left unnamed (io/committed.py)
    done = store.markers()  # read once: the checks below and each shard's commit use it
    _check_same_judge(store, info, has_scores=bool(done))
    store.write_info(info)
    out = ScoreOutcome(name=name, judge_model=key)
    todo = [c for c in commits.values() if not store.is_done(c.name, done)]
    out.skipped_shards = len(commits) - len(todo)
    if not todo:
        out.seconds = time.perf_counter() - t0
        return out
    inputs = inputs if inputs is not None else load_inputs(cfg)
    if models is None or key not in models.models:
        own_pools = pools is None  # pools this call starts are its to shut down
        pools = {} if pools is None else pools
        models = build_models(cfg, inputs.graphs, str(rd.cache), keys=[key], pools=pools)
    else:
        own_pools, pools = False, {}
    items = {item_key(task, it.id): it for task, its in inputs.items.items() for it in its}
    accounting = Accounting()
    journal = SpendJournal(rd.root, unit=f"score-{name}", kind="score", score_set=name, config_hash=config_hash,
                           invocation=invocation, prices={key: model_prices(cfg).get(key)})
    model = models.model(key, accounting, unit=f"score-{name}", sink=journal)  # one cache folder per score set
    settings = judge_settings(cfg)

    gate = asyncio.Semaphore(max(1, shard_concurrency))
    # a judge of the simulator's own record (the review) reads its states and labels too
    record = any(JUDGES.get(j).reads_record for j in judges)
    session_cols = SESSION_COLUMNS + (RECORD_SESSION_COLUMNS if record else [])
    turn_cols = TURN_COLUMNS + (RECORD_TURN_COLUMNS if record else [])

    async def judge_shard(marker: Commit) -> None:
        async with gate:
            sessions, turns = read_commit_tables(rd.root, marker, reader.index.superseded[marker.name],
                                                 session_cols, turn_cols)
            transcripts = transcripts_from_tables(sessions, turns, items)
            kept = store.kept_rows(marker.name, done.get(marker.name))
            started = time.perf_counter()
            fresh = await judge_transcripts([t for t in transcripts if t.session_id not in kept], model,
                                            name=name, model_key=key, judges=judges, settings=settings,
                                            price=journal.prices[key])  # an unpriced offline judge is free
            by_id = {**kept, **{r.session_id: r for r in fresh}}
            rows = [by_id[t.session_id] for t in transcripts]
            # which journal each row's judge spend is in: a kept row's stays the earlier pass's
            earlier = (done[marker.name].summary or {}).get(JOURNAL_KEY, {}) if marker.name in done else {}
            spent_in = {sid: earlier[sid] for sid in kept if isinstance(earlier, dict) and sid in earlier}
            spent_in.update({r.session_id: journal.token for r in fresh})
            out.committed.append(
                store.commit(marker.shard_id, marker.token, rows,
                             {"seconds": round(time.perf_counter() - started, 3), JOURNAL_KEY: spent_in},
                             old=done.get(marker.name))
            )
            journal.committed(r.session_id for r in fresh)

    async def judge_all() -> None:
        try:
            await asyncio.gather(*(judge_shard(m) for m in sorted(todo, key=lambda m: m.name)))
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    try:
        asyncio.run(judge_all())
    finally:
        journal.close()
        if own_pools:
            shutdown_pools(pools)
    out.llm = accounting.to_dict()
    out.seconds = time.perf_counter() - t0
    return out


__all__ = ["ScoreError", "ScoreOutcome", "judge_settings", "resolve_judge", "score_run"]
