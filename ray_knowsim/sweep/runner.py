"""Run a sweep on Ray: plan pieces, re-score them in tasks, stream rows to Parquet, resume.

A piece is (settings block b, conversation chunk c): one Ray task re-scores every setting of the
block on every conversation of the chunk, sized so a task runs seconds (kernel calls are
microseconds per pair; scheduling is a millisecond per task). Each chunk is packed once by the
driver and shared through the object store. The driver writes each finished piece atomically
(``rows/part-bB-cC.parquet`` plus its partial sums under ``partials/``), so rows stream to disk as
tasks finish and a re-run skips every piece already there. ``sweep.json`` records the sweep's
fingerprint (source, settings, initial-state plan, piece sizes): resuming into a folder that holds
a different sweep is refused rather than mixed.

Output folder:
  sweep.json            manifest (fingerprint, sizes, status, timing, default-identity check)
  settings.parquet      one row per setting: index, origin, key, overrides, resolved rules, params
  rows/                 one row per (setting, conversation)  -- sweep.rescore.row_schema()
  partials/             per-task partial sums (internal; reduced into aggregates.parquet)
  aggregates.parquet    per (setting, group_by..., rank_by): n, means, stds, early-stop rates
  setting_summary.parquet  per setting: params, pooled means, ranking agreement with the default
  identity.csv          the default setting's rows against the source's recorded metrics
  report/               sensitivity tables (CSV) and plots (PNG), listed in report/index.md
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from ray_knowsim.engine.local_ray import choose_auth_mode
from ray_knowsim.sweep.aggregate import CELL_COLUMNS, partials, reduce
from ray_knowsim.sweep.config import SweepConfig, SweepConfigError
from ray_knowsim.sweep.conversation import META_COLUMNS, Conversation
from ray_knowsim.sweep.metrics import FLOAT_COLUMNS, INT_COLUMNS
from ray_knowsim.sweep.rescore import InitPlan, pick_backend, prepare, rescore
from ray_knowsim.sweep.source import SourceData, load_source
from ray_knowsim.sweep.space import Setting, canonical_json, expand, swept_params
from ray_knowsim.sweep.store import read_json, remove_stale_tmp, write_json_atomic, write_parquet_atomic

MANIFEST = "sweep.json"
#: rough cost of one session-turn, used only to size pieces (seconds)
COST_PER_SESSION_TURN = {"kernel": 2e-6, "python": 1.5e-4}
MAX_CONVERSATIONS_PER_TASK = 1000
#: files and folders a sweep writes (the only things ``fresh`` deletes)
OUTPUTS = (".tmp", "rows", "partials", "report", "settings.parquet", "aggregates.parquet", "setting_summary.parquet", "identity.csv", MANIFEST)

Progress = Callable[[str], None]


@dataclass
class SweepPlan:
    cfg: SweepConfig
    out_dir: Path
    source: SourceData
    settings: list[Setting]
    params: list[str]
    backend: str
    init: InitPlan
    conversations_per_task: int
    settings_per_task: int
    fingerprint: str
    pieces: list[tuple[int, int]] = field(default_factory=list)  # (settings block, conversation chunk)

    @property
    def n_pairs(self) -> int:
        return len(self.settings) * len(self.source.conversations)

    def block(self, b: int) -> list[Setting]:
        return self.settings[b * self.settings_per_task : (b + 1) * self.settings_per_task]

    def chunk(self, c: int) -> list[Conversation]:
        convs = self.source.conversations
        return convs[c * self.conversations_per_task : (c + 1) * self.conversations_per_task]

    def piece_name(self, b: int, c: int) -> str:
        return f"part-b{b:05d}-c{c:05d}.parquet"


def check_report_config(cfg: SweepConfig) -> None:
    known = set(FLOAT_COLUMNS) | set(INT_COLUMNS)
    bad = [m for m in cfg.report.metrics + cfg.report.ranking_metrics if m not in known]
    if bad:
        raise SweepConfigError(f"report: unknown metric(s) {bad}; choose from {sorted(known)}")
    for col in [cfg.report.rank_by, *cfg.report.group_by]:
        if col not in CELL_COLUMNS:
            raise SweepConfigError(f"report: cannot group or rank by {col!r}; choose from {list(CELL_COLUMNS)}")
    if cfg.report.rank_by in cfg.report.group_by:
        raise SweepConfigError("report: rank_by must not also be in group_by")


def _sizes(cfg: SweepConfig, backend: str, n_settings: int, convs: list[Conversation]) -> tuple[int, int]:
    ex = cfg.execution
    avg_turns = max(1.0, sum(len(c.turns) for c in convs) / len(convs))
    pairs = max(1, int(ex.target_task_seconds / (COST_PER_SESSION_TURN[backend] * avg_turns)))
    per_chunk = ex.conversations_per_task or min(len(convs), MAX_CONVERSATIONS_PER_TASK, pairs)
    per_block = ex.settings_per_task or max(1, pairs // per_chunk)
    if ex.settings_per_task is None:  # enough tasks to keep every CPU busy
        n_chunks = math.ceil(len(convs) / per_chunk)
        want_blocks = max(1, math.ceil(2 * ex.num_cpus / n_chunks))
        per_block = max(1, min(per_block, math.ceil(n_settings / want_blocks)))
    return per_chunk, min(per_block, n_settings)


def plan_sweep(cfg: SweepConfig, *, backend: str | None = None) -> SweepPlan:
    """Validate everything and load the source; no Ray, nothing written."""
    settings = expand(cfg.space, cfg.base)  # every setting through RuleConfig first
    check_report_config(cfg)
    source = load_source(cfg)
    init = InitPlan(cfg.initial_states, cfg.init_seed, settings[0].rules)
    if cfg.initial_states != "keep":
        for s in settings:
            if not init.resamples(s.rules):
                continue
            missing = {c.meta.get("knowledge_level") for c in source.conversations} - set(s.rules.init_ratios)
            if missing:
                raise SweepConfigError(f"setting {s.index}: cannot re-sample initial states for levels {sorted(missing)}")
    chosen = pick_backend(backend or cfg.execution.backend)
    per_chunk, per_block = _sizes(cfg, chosen, len(settings), source.conversations)
    fp = hashlib.sha256(
        canonical_json(
            {
                "source": source.fingerprint,
                "settings": [s.key for s in settings],
                "init": [cfg.initial_states, cfg.init_seed],
                "max_turns": cfg.max_turns,
                "sizes": [per_chunk, per_block],
            }
        ).encode()
    ).hexdigest()[:16]
    plan = SweepPlan(cfg, cfg.resolve(cfg.output), source, settings, swept_params(cfg.space), chosen, init, per_chunk, per_block, fp)
    n_blocks = math.ceil(len(settings) / per_block)
    n_chunks = math.ceil(len(source.conversations) / per_chunk)
    plan.pieces = [(b, c) for b in range(n_blocks) for c in range(n_chunks)]
    return plan


# --- output folder ---------------------------------------------------------------------------------


def _prepare_out_dir(plan: SweepPlan, fresh: bool) -> None:
    out = plan.out_dir
    manifest = out / MANIFEST
    if out.exists() and any(out.iterdir()):
        if not manifest.exists():
            raise SweepConfigError(f"{out} exists and is not a sweep output folder; choose another output")
        if fresh:
            for name in OUTPUTS:
                p = out / name
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
        else:
            old = read_json(manifest)
            if old.get("fingerprint") != plan.fingerprint:
                raise SweepConfigError(
                    f"{out} holds a different sweep (source, settings, initial-state plan or piece sizes changed); "
                    "rerun with --fresh to replace it, or choose another output"
                )
    remove_stale_tmp(out)
    for sub in ("rows", "partials"):
        (out / sub).mkdir(parents=True, exist_ok=True)


def settings_table(plan: SweepPlan) -> pa.Table:
    rows = []
    for s in plan.settings:
        row: dict[str, Any] = {
            "setting": s.index,
            "origin": s.origin,
            "key": s.key,
            "is_default": s.index == 0,
            "overrides_json": canonical_json(s.overrides),
            "rules_json": s.rules_json,
        }
        for name in plan.params:
            row[f"p.{name}"] = s.params.get(name)
        rows.append(row)
    df = pd.DataFrame(rows)
    for name in plan.params:  # mixed types (e.g. true and 0.5) become text
        col = df[f"p.{name}"]
        if col.map(type).nunique() > 1 and not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
            df[f"p.{name}"] = col.map(lambda v: json.dumps(v))
    return pa.Table.from_pandas(df, preserve_index=False)


def done_pieces(plan: SweepPlan) -> set[tuple[int, int]]:
    done = set()
    for b, c in plan.pieces:
        name = plan.piece_name(b, c)
        if (plan.out_dir / "rows" / name).exists() and (plan.out_dir / "partials" / name).exists():
            done.add((b, c))
    return done


def _commit_piece(plan: SweepPlan, b: int, c: int, rows: pa.Table, part: pa.Table) -> None:
    name = plan.piece_name(b, c)
    write_parquet_atomic(part, plan.out_dir / "partials" / name)
    write_parquet_atomic(rows, plan.out_dir / "rows" / name, row_group_size=65536)  # last: marks the piece done


# --- Ray ---------------------------------------------------------------------------------------------


def score_piece(prepared, settings: list[Setting], init: InitPlan, chunk: int) -> tuple[pa.Table, pa.Table, float]:
    """One piece's work (the body of a Ray task; callable without Ray)."""
    t0 = time.perf_counter()
    rows = rescore(prepared, settings, init)
    return rows, partials(rows, chunk), time.perf_counter() - t0


def ensure_ray(num_cpus: int, address: str | None = None) -> bool:
    """Connect to Ray; returns True when this call started it (and so should shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, logging_level="WARNING")
    else:
        choose_auth_mode()  # token auth, chosen (Ray's default) rather than defaulted with a warning
        ray.init(
            address="local",
            num_cpus=num_cpus,
            object_store_memory=384 * 2**20,
            include_dashboard=False,
            logging_level="WARNING",
        )
    return True


@dataclass
class SweepResult:
    plan: SweepPlan
    pieces_run: int
    pieces_skipped: int
    seconds: float
    rescore_seconds: float  # summed over tasks
    identity: dict[str, Any] | None = None
    report_files: list[str] = field(default_factory=list)

    @property
    def out_dir(self) -> Path:
        return self.plan.out_dir


def run_pieces(plan: SweepPlan, todo: list[tuple[int, int]], progress: Progress) -> float:
    """Submit the pieces as Ray tasks (bounded in flight) and commit each as it finishes."""
    import ray

    if not todo:
        return 0.0
    task = ray.remote(num_cpus=1)(score_piece)
    chunk_refs: dict[int, Any] = {}
    inflight: dict[Any, tuple[int, int]] = {}
    limit = max(2, plan.cfg.execution.inflight_per_cpu * int(ray.cluster_resources().get("CPU", 1)))
    queue = list(todo)
    busy = 0.0
    done = 0
    last_report = time.monotonic()
    while queue or inflight:
        while queue and len(inflight) < limit:
            b, c = queue.pop(0)
            if c not in chunk_refs:
                chunk_refs[c] = ray.put(prepare(plan.chunk(c), plan.backend))
            inflight[task.remote(chunk_refs[c], plan.block(b), plan.init, c)] = (b, c)
        ready, _ = ray.wait(list(inflight), num_returns=1)
        for ref in ready:
            b, c = inflight.pop(ref)
            rows, part, secs = ray.get(ref)
            _commit_piece(plan, b, c, rows, part)
            busy += secs
            done += 1
            if not any(pc == c for _, pc in queue) and not any(pc == c for _, pc in inflight.values()):
                chunk_refs.pop(c, None)  # last piece of this chunk: free its object
            if time.monotonic() - last_report > 5 or done == len(todo):
                progress(f"  {done}/{len(todo)} pieces ({rows.num_rows} rows in {secs:.1f} s for the last one)")
                last_report = time.monotonic()
    return busy


def run_pieces_inline(plan: SweepPlan, todo: list[tuple[int, int]], progress: Progress) -> float:
    """The same pieces in this process, one after another (debugging, tiny sweeps; no Ray)."""
    busy = 0.0
    prepared: dict[int, Any] = {}
    for k, (b, c) in enumerate(todo, start=1):
        if c not in prepared:
            prepared = {c: prepare(plan.chunk(c), plan.backend)}
        rows, part, secs = score_piece(prepared[c], plan.block(b), plan.init, c)
        _commit_piece(plan, b, c, rows, part)
        busy += secs
    if todo:
        progress(f"  {len(todo)}/{len(todo)} pieces (in process)")
    return busy


def run_sweep(
    cfg: SweepConfig,
    *,
    fresh: bool = False,
    backend: str | None = None,
    address: str | None = None,
    report: bool = True,
    use_ray: bool = True,
    progress: Progress = print,
) -> SweepResult:
    t0 = time.perf_counter()
    plan = plan_sweep(cfg, backend=backend)
    _prepare_out_dir(plan, fresh)
    done = done_pieces(plan)
    todo = [p for p in plan.pieces if p not in done]
    src = plan.source
    progress(
        f"sweep {cfg.name!r}: {len(plan.settings)} settings x {len(src.conversations)} conversations "
        f"({plan.n_pairs} re-scorings, backend {plan.backend}); {len(plan.pieces)} pieces of "
        f"{plan.settings_per_task} settings x {plan.conversations_per_task} conversations; {len(done)} already done"
    )
    if src.skipped:
        progress("  skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(src.skipped.items())))
    manifest = {
        "name": cfg.name,
        "fingerprint": plan.fingerprint,
        "status": "running",
        "source": src.description,
        "n_settings": len(plan.settings),
        "n_conversations": len(src.conversations),
        "skipped": dict(src.skipped),
        "params": plan.params,
        "initial_states": cfg.initial_states,
        "conversations_per_task": plan.conversations_per_task,
        "settings_per_task": plan.settings_per_task,
        "pieces": len(plan.pieces),
        "backend": plan.backend,
        "config": cfg.model_dump(mode="json"),
    }
    write_json_atomic(manifest, plan.out_dir / MANIFEST)
    write_parquet_atomic(settings_table(plan), plan.out_dir / "settings.parquet")

    started = ensure_ray(cfg.execution.num_cpus, address) if (todo and use_ray) else False
    try:
        busy = run_pieces(plan, todo, progress) if use_ray else run_pieces_inline(plan, todo, progress)
    finally:
        if started:
            import ray

            ray.shutdown()

    finish(plan)
    from ray_knowsim.sweep.identity import check_identity

    identity = check_identity(plan)
    result = SweepResult(plan, len(todo), len(done), 0.0, busy, identity)
    if report:
        from ray_knowsim.sweep.report import write_report

        result.report_files = write_report(plan.out_dir, cfg.report)
    result.seconds = time.perf_counter() - t0
    manifest.update(
        status="done",
        seconds=round(result.seconds, 3),
        rescore_task_seconds=round(busy, 3),
        pieces_run=len(todo),
        pieces_skipped=len(done),
        identity=identity,
    )
    write_json_atomic(manifest, plan.out_dir / MANIFEST)
    return result


def finish(plan: SweepPlan) -> None:
    """Reduce the partial sums into aggregates.parquet (per setting x group x ranked column)."""
    parts = ds.dataset(plan.out_dir / "partials", format="parquet").to_table().to_pandas()
    by = [*plan.cfg.report.group_by, plan.cfg.report.rank_by]
    write_parquet_atomic(pa.Table.from_pandas(reduce(parts, by), preserve_index=False), plan.out_dir / "aggregates.parquet")


def read_rows(out_dir: Path, columns: list[str] | None = None, settings: list[int] | None = None) -> pd.DataFrame:
    """The rows table (optionally a few columns / settings) as pandas, sorted by (setting, conversation)."""
    dataset = ds.dataset(Path(out_dir) / "rows", format="parquet")
    flt = ds.field("setting").isin(settings) if settings is not None else None
    cols = None if columns is None else list(dict.fromkeys(["setting", "conversation", *columns]))
    df = dataset.to_table(columns=cols, filter=flt).to_pandas()
    for c in META_COLUMNS:
        if c in df and isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df.sort_values(["setting", "conversation"], kind="stable").reset_index(drop=True)


__all__ = [
    "MANIFEST",
    "SweepPlan",
    "SweepResult",
    "check_report_config",
    "done_pieces",
    "ensure_ray",
    "finish",
    "plan_sweep",
    "read_rows",
    "run_pieces",
    "run_pieces_inline",
    "run_sweep",
    "score_piece",
    "settings_table",
]
