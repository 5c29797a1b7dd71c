"""Run a sweep on Ray: cut the work into pieces for the cluster at hand, tasks re-score and commit
them, resume from whatever is committed.

A block is a fixed run of conversations (``conversations_per_block``, part of the sweep's
identity); a piece is a range of settings of one block, one Ray task, sized when the sweep
starts from the CPUs of the cluster it runs on (``pieces.settings_per_piece``). The driver packs
each block once into numpy arrays (``rescore.prepare``) and puts it in the object store; every
task of that block gets it by reference, re-scores its settings, and writes its rows and partial
sums itself, then its commit marker (``commits``). What is committed is a set of settings per
block, whatever pieces made it, so a sweep started on 2 CPUs resumes on 64 (other pieces) without
redoing or double-counting anything, and its outputs equal an uninterrupted sweep's.

``sweep.json`` records the sweep's fingerprint (source, settings, initial-state plan, horizon,
block size): resuming into a folder that holds another sweep is refused rather than mixed.

Output folder:
  sweep.json            manifest (fingerprint, sizes, status, timing, each run's layout, identity check)
  settings.parquet      one row per setting: index, origin, key, overrides, resolved rules, params
  rows/                 one row per (setting, conversation) -- sweep.rescore.row_schema(); read with read_rows
  partials/             per-piece partial sums (internal; reduced into aggregates.parquet)
  committed/            one commit marker per piece (readers follow these, never the folders)
  aggregates.parquet    per (setting, group_by..., rank_by): n, means, stds, early-stop rates
  setting_summary.parquet  per setting: params, pooled means, ranking agreement with the default
  identity.csv          the default setting's rows against the source's recorded metrics
  report/               sensitivity tables (CSV) and plots (PNG), listed in report/index.md

The output folder must be one every node mounts at the same path (tasks write there): the fan-out
checks every node before its first piece and each node that joins (cluster.bounded_fan_out), and a
task that does not find the folder's manifest refuses to write (``commits.check_visible``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa

from ray_knowsim.cluster.bounded_fan_out import BoundedFanOut
from ray_knowsim.cluster.codecheck import require_same_code
from ray_knowsim.cluster.ray_session import ray_session
from ray_knowsim.sweep.aggregate import CELL_COLUMNS, partials, reduce
from ray_knowsim.sweep.commits import (
    MANIFEST,
    MARKERS,
    check_visible,
    collect_garbage,
    commit_piece,
    drop_broken,
    read_commits,
    read_table,
)
from ray_knowsim.sweep.config import ExecutionConfig, SweepConfig, SweepConfigError
from ray_knowsim.sweep.conversation import META_COLUMNS, Conversation
from ray_knowsim.schema.metrics import outside_metrics
from ray_knowsim.sweep.metrics import FLOAT_COLUMNS, INT_COLUMNS
from ray_knowsim.sweep.pieces import Piece, Range, cut, missing, settings_per_piece
from ray_knowsim.sweep.rescore import InitPlan, Prepared, pick_backend, prepare, rescore, row_schema
from ray_knowsim.sweep.source import SourceData, load_source
from ray_knowsim.sweep.space import Setting, canonical_json, expand, swept_params
from ray_knowsim.sweep.store import read_json, write_json_atomic, write_parquet_atomic

#: the output folder's layout (1: pieces written by the driver, no markers; 2: commit markers)
LAYOUT = 2
#: rough cost of one session-turn, used only to size pieces (seconds)
COST_PER_SESSION_TURN = {"kernel": 2e-6, "python": 1.5e-4}
CONVERSATIONS_PER_BLOCK = 1000
#: how often the driver re-reads the cluster's CPUs for its in-flight window (seconds)
WINDOW_REFRESH_S = 2.0
#: files and folders a sweep writes (the only things ``fresh`` deletes)
OUTPUTS = (".tmp", "rows", "partials", MARKERS, "report", "settings.parquet", "aggregates.parquet",
           "setting_summary.parquet", "identity.csv", MANIFEST)  # fmt: skip

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
    block_size: int  # conversations per block
    fingerprint: str

    @property
    def n_pairs(self) -> int:
        return len(self.settings) * len(self.source.conversations)

    @property
    def n_blocks(self) -> int:
        return -(-len(self.source.conversations) // self.block_size)

    def block(self, b: int) -> list[Conversation]:
        return self.source.conversations[b * self.block_size : (b + 1) * self.block_size]

    def block_len(self, b: int) -> int:
        return min(self.block_size, len(self.source.conversations) - b * self.block_size)

    def settings_of(self, piece: Piece) -> list[Setting]:
        return self.settings[piece.start : piece.stop]

    def pairs(self, ranges: dict[int, list[Range]]) -> int:
        """(setting, conversation) pairs in per-block settings ranges."""
        return sum(self.block_len(b) * (y - x) for b, rs in ranges.items() for x, y in rs)

    @property
    def seconds_per_pair(self) -> float:
        convs = self.source.conversations
        avg_turns = max(1.0, sum(len(c.turns) for c in convs) / len(convs))
        return COST_PER_SESSION_TURN[self.backend] * avg_turns


def check_report_config(cfg: SweepConfig) -> None:
    known = set(FLOAT_COLUMNS) | set(INT_COLUMNS)
    bad = [m for m in cfg.report.metrics + cfg.report.ranking_metrics if m not in known]
    outside = sorted(set(bad) & {m.name for m in outside_metrics()})
    if outside:  # a plugin's computation runs over a Python trajectory, not the kernel's counters
        raise SweepConfigError(f"report: {outside}: outside metric(s) (a plugin's) are not re-scored by sweeps, "
                               "which compute every metric from the numba kernel's counters; "
                               f"choose from {sorted(known)}")
    if bad:
        raise SweepConfigError(f"report: unknown metric(s) {bad}; choose from {sorted(known)}")
    for col in [cfg.report.rank_by, *cfg.report.group_by]:
        if col not in CELL_COLUMNS:
            raise SweepConfigError(f"report: cannot group or rank by {col!r}; choose from {list(CELL_COLUMNS)}")
    if cfg.report.rank_by in cfg.report.group_by:
        raise SweepConfigError("report: rank_by must not also be in group_by")


def plan_sweep(cfg: SweepConfig, *, backend: str | None = None) -> SweepPlan:
    """Validate everything and load the source; no Ray, nothing written. The piece layout is not
    part of the plan: it is cut for the cluster when the sweep runs (``run_sweep``)."""
    settings = expand(cfg.space, cfg.base)  # every setting through RuleConfig first
    check_report_config(cfg)
    source = load_source(cfg)
    init = InitPlan(cfg.initial_states, cfg.init_seed, settings[0].rules)
    if cfg.initial_states != "keep":
        for s in settings:
            if not init.resamples(s.rules):
                continue
            missing_levels = {c.meta.get("knowledge_level") for c in source.conversations} - set(s.rules.init_ratios)
            if missing_levels:
                raise SweepConfigError(f"setting {s.index}: cannot re-sample initial states for levels {sorted(missing_levels)}")
    chosen = pick_backend(backend or cfg.execution.backend)
    block_size = cfg.execution.conversations_per_block or min(len(source.conversations), CONVERSATIONS_PER_BLOCK)
    fp = hashlib.sha256(
        canonical_json(
            {
                "source": source.fingerprint,
                "settings": [s.key for s in settings],
                "init": [cfg.initial_states, cfg.init_seed],
                "max_turns": cfg.max_turns,
                "block": block_size,
            }
        ).encode()
    ).hexdigest()[:16]
    return SweepPlan(cfg, cfg.resolve(cfg.output), source, settings, swept_params(cfg.space), chosen, init, block_size, fp)


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
            if old.get("layout") != LAYOUT:
                raise SweepConfigError(f"{out} was written by an earlier version of the sweep (no commit markers); "
                                       "rerun with --fresh to replace it, or choose another output")  # fmt: skip
            if old.get("fingerprint") != plan.fingerprint:
                raise SweepConfigError(
                    f"{out} holds a different sweep (source, settings, initial-state plan, horizon or "
                    "conversations_per_block changed); rerun with --fresh to replace it, or choose another output"
                )
    for sub in ("rows", "partials", MARKERS):
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


# --- tasks ---------------------------------------------------------------------------------------------


def score_piece(prepared: Prepared, settings: list[Setting], init: InitPlan, piece: Piece, out_dir: str,
                fingerprint: str) -> dict[str, Any]:
    """One piece's work, the body of a Ray task (callable without Ray): re-score, sum, commit.
    Returns only a receipt; the rows stay where the task wrote them."""
    out = Path(out_dir)
    check_visible(out, fingerprint)
    t0 = time.perf_counter()
    rows = rescore(prepared, settings, init)
    part = partials(rows, piece.block)
    marker = commit_piece(out, fingerprint, piece, rows, part, seconds=time.perf_counter() - t0, node=_node_name())
    return {"piece": piece.name, "rows": marker.rows, "seconds": marker.seconds, "write_seconds": marker.write_seconds,
            "node": marker.node}  # fmt: skip


def _node_name() -> str:
    """Host name, plus the Ray node id inside a Ray worker (several nodes can share a host)."""
    host = socket.gethostname()
    import ray

    if not ray.is_initialized():
        return host
    return f"{host}/{ray.get_runtime_context().get_node_id()[:12]}"


def cluster_cpus(ex: ExecutionConfig) -> int:
    """CPUs to size pieces for: the cluster's now, or ``cluster_cpus`` when that is larger (an
    autoscaling cluster that will grow); at least 1 (a cluster waiting for its first worker)."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 0)), ex.cluster_cpus or 0)


@dataclass
class PieceStats:
    pieces: int = 0
    rows: int = 0
    task_seconds: float = 0.0  # re-scoring + partial sums, summed over tasks
    write_seconds: float = 0.0  # the tasks' commits, summed
    wall_seconds: float = 0.0  # first submission to last commit
    nodes: Counter = field(default_factory=Counter)  # node -> pieces committed there

    def add(self, receipt: dict[str, Any]) -> None:
        self.pieces += 1
        self.rows += receipt["rows"]
        self.task_seconds += receipt["seconds"]
        self.write_seconds += receipt["write_seconds"]
        self.nodes[receipt["node"]] += 1


def _prepared(plan: SweepPlan, block: int) -> Prepared:
    return prepare(plan.block(block), plan.backend, resample=plan.init.mode != "keep")


def run_pieces(plan: SweepPlan, pieces: list[Piece], progress: Progress) -> PieceStats:
    """Submit the pieces as Ray tasks (bounded in flight, cluster.bounded_fan_out) and collect
    their receipts; the first piece that fails stops the sweep (the pieces in flight are
    cancelled; what is committed stays, and the same command resumes)."""
    import ray

    stats = PieceStats()
    if not pieces:
        return stats
    t0 = time.perf_counter()
    task = ray.remote(num_cpus=1, max_retries=3, retry_exceptions=False)(score_piece)
    left = Counter(p.block for p in pieces)
    block_refs: dict[int, Any] = {}
    ex = plan.cfg.execution

    def submit(p: Piece) -> Any:
        if p.block not in block_refs:
            block_refs[p.block] = ray.put(_prepared(plan, p.block))
        return task.remote(block_refs[p.block], plan.settings_of(p), plan.init, p, str(plan.out_dir), plan.fingerprint)

    fan = BoundedFanOut(pieces, submit, window=lambda: max(2, ex.inflight_per_cpu * cluster_cpus(ex)),
                        refresh_s=WINDOW_REFRESH_S, fail_fast=True, shared_dir=plan.out_dir,
                        shared_what="the sweep's output folder")
    last_report = time.monotonic()
    for finished in fan:
        for f in finished:
            p, receipt = f.item, f.value
            stats.add(receipt)
            left[p.block] -= 1
            if not left[p.block]:
                block_refs.pop(p.block, None)  # last piece of this block: free its object
            if time.monotonic() - last_report > 5 or stats.pieces == len(pieces):
                progress(f"  {stats.pieces}/{len(pieces)} pieces ({receipt['rows']} rows in {receipt['seconds']:.1f} s "
                         f"for the last one, on {len(stats.nodes)} node(s))")  # fmt: skip
                last_report = time.monotonic()
    stats.wall_seconds = time.perf_counter() - t0
    return stats


def run_pieces_inline(plan: SweepPlan, pieces: list[Piece], progress: Progress) -> PieceStats:
    """The same pieces in this process, one after another (debugging, tiny sweeps; no Ray)."""
    stats = PieceStats()
    t0 = time.perf_counter()
    prepared: dict[int, Prepared] = {}
    for p in pieces:
        if p.block not in prepared:
            prepared = {p.block: _prepared(plan, p.block)}
        stats.add(score_piece(prepared[p.block], plan.settings_of(p), plan.init, p, str(plan.out_dir), plan.fingerprint))
    if pieces:
        progress(f"  {len(pieces)}/{len(pieces)} pieces (in process)")
    stats.wall_seconds = time.perf_counter() - t0
    return stats


# --- the sweep ---------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    plan: SweepPlan
    pieces_run: int  # this run's pieces
    pieces_skipped: int  # pieces committed before this run started (by any layout)
    pairs_run: int  # (setting, conversation) pairs re-scored by this run
    pairs_skipped: int  # pairs committed before it
    seconds: float
    rescore_seconds: float  # summed over tasks
    stats: PieceStats = field(default_factory=PieceStats)
    layout: dict[str, Any] = field(default_factory=dict)  # this run's cut: cpus, settings per piece, pieces
    identity: dict[str, Any] | None = None
    report_files: list[str] = field(default_factory=list)

    @property
    def out_dir(self) -> Path:
        return self.plan.out_dir


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
    old = read_json(plan.out_dir / MANIFEST) if (plan.out_dir / MANIFEST).exists() else {}
    commits = read_commits(plan.out_dir, plan.fingerprint)
    dropped = drop_broken(plan.out_dir, commits)
    collect_garbage(plan.out_dir, commits)
    covered = commits.covered()
    todo = missing(len(plan.settings), plan.n_blocks, covered)
    src = plan.source
    pairs_done = plan.pairs(covered)
    progress(f"sweep {cfg.name!r}: {len(plan.settings)} settings x {len(src.conversations)} conversations "
             f"({plan.n_pairs} re-scorings, backend {plan.backend})")
    progress(f"  {plan.n_blocks} block(s) of {plan.block_size} conversations; {pairs_done} re-scorings already "
             f"committed ({len(commits.markers)} pieces)")
    if dropped:
        progress(f"  {len(dropped)} commit marker(s) whose files are gone were removed; their pieces are redone: {', '.join(dropped[:5])}")
    if src.skipped:
        progress("  skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(src.skipped.items())))
    manifest = {
        "layout": LAYOUT,
        "name": cfg.name,
        "fingerprint": plan.fingerprint,
        "status": "running",
        "source": src.description,
        "n_settings": len(plan.settings),
        "n_conversations": len(src.conversations),
        "skipped": dict(src.skipped),
        "params": plan.params,
        "initial_states": cfg.initial_states,
        "conversations_per_block": plan.block_size,
        "blocks": plan.n_blocks,
        "backend": plan.backend,
        "config": cfg.model_dump(mode="json"),
        "runs": old.get("runs", []) if not fresh else [],
        "removed_broken_commits": (old.get("removed_broken_commits", []) if not fresh else []) + dropped,
    }
    write_json_atomic(manifest, plan.out_dir / MANIFEST)
    write_parquet_atomic(settings_table(plan), plan.out_dir / "settings.parquet")

    layout: dict[str, Any] = {}
    with ray_session(address, num_cpus=cfg.execution.num_cpus) if (todo and use_ray) else nullcontext(False):
        if todo and use_ray:
            require_same_code(progress)  # the pieces run our code on every worker
        cpus = cluster_cpus(cfg.execution) if (todo and use_ray) else 1
        per_piece = settings_per_piece(todo=todo, block_size=plan.block_size, cpus=cpus, seconds_per_pair=plan.seconds_per_pair,
                                       target_task_seconds=cfg.execution.target_task_seconds,
                                       explicit=cfg.execution.settings_per_task)  # fmt: skip
        pieces = cut(todo, per_piece)
        layout = {"cpus": cpus, "settings_per_piece": per_piece, "pieces": len(pieces), "ray": bool(todo and use_ray)}
        if pieces:
            progress(f"  {len(pieces)} piece(s) of up to {per_piece} settings for {cpus} CPU(s)")
        stats = run_pieces(plan, pieces, progress) if use_ray else run_pieces_inline(plan, pieces, progress)
    collect_garbage(plan.out_dir, read_commits(plan.out_dir, plan.fingerprint))  # superseded re-commits

    finish(plan)
    from ray_knowsim.sweep.identity import check_identity

    identity = check_identity(plan, read_rows)
    result = SweepResult(plan, stats.pieces, len(commits.markers), plan.pairs(todo), pairs_done, 0.0, stats.task_seconds, stats,
                         layout, identity)  # fmt: skip
    if report:
        from ray_knowsim.sweep.report import write_report

        result.report_files = write_report(plan.out_dir, cfg.report)
    result.seconds = time.perf_counter() - t0
    manifest["runs"].append(
        dict(layout, pairs_run=result.pairs_run, pairs_skipped=pairs_done, seconds=round(result.seconds, 3),
             pieces_seconds=round(stats.wall_seconds, 3), task_seconds=round(stats.task_seconds, 3),
             write_seconds=round(stats.write_seconds, 3), nodes=dict(stats.nodes))  # fmt: skip
    )
    manifest.update(status="done", seconds=round(result.seconds, 3), identity=identity)
    write_json_atomic(manifest, plan.out_dir / MANIFEST)
    return result


def finish(plan: SweepPlan) -> None:
    """Reduce the committed partial sums into aggregates.parquet (per setting x group x ranked column)."""
    parts = read_table(plan.out_dir, "partials", fingerprint=plan.fingerprint)
    frame = parts.to_pandas() if parts is not None else pd.DataFrame()
    by = [*plan.cfg.report.group_by, plan.cfg.report.rank_by]
    write_parquet_atomic(pa.Table.from_pandas(reduce(frame, by), preserve_index=False), plan.out_dir / "aggregates.parquet")


def read_rows(out_dir: Path, columns: list[str] | None = None, settings: list[int] | None = None) -> pd.DataFrame:
    """The committed rows (optionally a few columns / settings) as pandas, sorted by (setting,
    conversation): each pair once, whatever pieces wrote it."""
    cols = None if columns is None else list(dict.fromkeys(["setting", "conversation", *columns]))
    table = read_table(Path(out_dir), "rows", columns=cols, settings=settings)
    if table is None:
        schema = row_schema()
        table = schema.empty_table() if cols is None else pa.schema([schema.field(c) for c in cols]).empty_table()
    df = table.to_pandas()
    for c in META_COLUMNS:
        if c in df and isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df.sort_values(["setting", "conversation"], kind="stable").reset_index(drop=True)


__all__ = [
    "CONVERSATIONS_PER_BLOCK",
    "LAYOUT",
    "MANIFEST",
    "PieceStats",
    "SweepPlan",
    "SweepResult",
    "check_report_config",
    "cluster_cpus",
    "finish",
    "plan_sweep",
    "read_rows",
    "run_pieces",
    "run_pieces_inline",
    "run_sweep",
    "score_piece",
    "settings_table",
]
