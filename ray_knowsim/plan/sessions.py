"""Deterministic session planning and sharding.

Sessions are the product item x level x condition x trial, in a fixed order (tasks and conditions
as the config lists them, items in file order after filters, levels as configured, trials
ascending). Their ids (``task/item/level/condition/trial``) and seeds depend on the config only:
a session's seed hashes the run seed with its id, never its position, so adding a condition or a
trial leaves every other session's seed unchanged.

The plan is arithmetic, not a list: session *i* and shard *k* are computed on demand, so planning
a million sessions costs the driver nothing but the items and graphs themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from ray_knowsim.config import RunConfig
from ray_knowsim.io.loaders import LoadError, load_graph_cache, load_init_cache, load_items
from ray_knowsim.schema.graph import IUGraph
from ray_knowsim.schema.items import INIT_CACHE_TASK_KEYS, Item
from ray_knowsim.schema.knowledge import InitCache
from ray_knowsim.schema.roles import RoleBudgetWarning
from ray_knowsim.sim.types import SessionSpec, ShardSpec, item_key


def derive_seed(run_seed: int, key: str) -> int:
    """A 31-bit seed from the run seed and a stable key (positive, fits every API's seed field)."""
    digest = hashlib.sha256(f"{run_seed}\x1f{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 33


def rerun_seed(run_seed: int, session_id: str, attempt: int) -> int:
    """The session seed of a rerun of a MODEL failure (attempt >= 2): a new draw, as reproducible
    as the first (run/resume.py says why the first seed is not reused)."""
    return derive_seed(run_seed, f"{session_id}#attempt-{attempt}")


def session_id(task: str, item_id: str, level: str, condition: str, trial: int) -> str:
    return f"{task}/{item_id}/{level}/{condition}/{trial}"


def shard_name(index: int) -> str:
    return f"shard-{index:06d}"


@dataclass(frozen=True)
class Condition:
    name: str
    assistant: str
    strategy: str
    simulator: str


@dataclass
class Inputs:
    """Everything read from disk before planning: items (per task, plan order), graphs, caches."""

    items: dict[str, list[Item]]  # task -> items in plan order
    graphs: dict[str, IUGraph]  # item_key -> graph
    init_caches: dict[str, InitCache | None]  # task -> cache (or None)


def load_inputs(cfg: RunConfig) -> Inputs:
    """Read and check the items, graphs and init caches; every problem names file and item."""
    run_cache = load_init_cache(cfg.resolve(cfg.init_cache)) if cfg.init_cache else None
    items: dict[str, list[Item]] = {}
    graphs: dict[str, IUGraph] = {}
    caches: dict[str, InitCache | None] = {}
    for k, task in enumerate(cfg.tasks):
        where = f"tasks.{k} ({task.name})"
        path = cfg.resolve(task.items)
        loaded = load_items(path, task.name)
        if task.split:
            loaded = [it for it in loaded if task.split in it.splits]
        if task.item_ids is not None:
            by_id = {it.id: it for it in loaded}
            unknown = [i for i in task.item_ids if i not in by_id]
            if unknown:
                raise LoadError(f"{where}.item_ids: not in {path}{' (split ' + task.split + ')' if task.split else ''}: {unknown}")
            loaded = [by_id[i] for i in task.item_ids]
        if task.limit is not None:
            loaded = loaded[: task.limit]
        if not loaded:
            raise LoadError(f"{where}: no items left after split/item_ids/limit")
        bad = [it.id for it in loaded if "/" in it.id]
        if bad:
            raise LoadError(f"{where}: item ids may not contain '/': {bad}")
        cache = load_graph_cache(cfg.resolve(task.graphs), cfg.graph_mode)
        missing = [it.id for it in loaded if it.id not in cache]
        if missing:
            raise LoadError(f"{where}.graphs: {cfg.resolve(task.graphs)} has no IU graph for items {missing}")
        items[task.name] = loaded
        for it in loaded:
            graphs[item_key(task.name, it.id)] = cache[it.id]
        caches[task.name] = load_init_cache(cfg.resolve(task.init_cache)) if task.init_cache else run_cache
    for warning in cfg.budget_warnings(largest_graph(graphs)):  # every command reads its config through here
        warnings.warn(warning, RoleBudgetWarning, stacklevel=2)
    return Inputs(items, graphs, caches)


def largest_graph(graphs: Mapping[str, IUGraph]) -> int | None:
    """IUs of the largest graph (None: no graph)."""
    return max((len(g.nodes) for g in graphs.values()), default=None)


class Plan:
    """The run's sessions and shards, computed from the config and the loaded inputs.

    ``condition_groups`` (from the placement plan, when the run's self-hosted models do not all fit
    on the cluster at once) orders the sessions group by group and keeps every shard inside one
    group, so the runner can start and stop the groups' models in turn. Without it there is one
    group of all conditions: the plain order below.
    """

    def __init__(self, cfg: RunConfig, inputs: Inputs, condition_groups: list[list[str]] | None = None) -> None:
        self.run_seed = cfg.seed
        self.levels = list(cfg.levels)
        self.conditions = [
            Condition(cfg.condition_name(c), c.assistant or cfg.roles.assistant.model or "", c.strategy, c.simulator)
            for c in cfg.conditions
        ]
        self.trials = cfg.trials
        self.shard_size = cfg.engine.shard_size
        self.units: list[tuple[str, Item]] = [(t, it) for t in inputs.items for it in inputs.items[t]]
        self.graphs = inputs.graphs
        self.init_caches = inputs.init_caches
        names = [c.name for c in self.conditions]
        groups = condition_groups or [names]
        flat = [c for g in groups for c in g]
        if sorted(flat) != sorted(names) or len(set(flat)) != len(flat):
            raise ValueError(f"condition groups {groups} must list every condition {names} exactly once")
        self.condition_groups = [list(g) for g in groups]
        # per group: (first session, sessions, condition indexes, first shard, shards)
        self._blocks: list[tuple[int, int, list[int], int, int]] = []
        first_session = first_shard = 0
        for g in groups:
            idx = [names.index(c) for c in g]
            n = len(self.units) * len(self.levels) * len(idx) * self.trials
            shards = math.ceil(n / self.shard_size)
            self._blocks.append((first_session, n, idx, first_shard, shards))
            first_session += n
            first_shard += shards

    @property
    def n_sessions(self) -> int:
        return sum(b[1] for b in self._blocks)

    @property
    def n_shards(self) -> int:
        return sum(b[4] for b in self._blocks)

    def shard_group(self, index: int) -> int:
        """Which condition group shard ``index`` belongs to."""
        for g, (_, _, _, first, n) in enumerate(self._blocks):
            if first <= index < first + n:
                return g
        raise IndexError(index)

    def _coords(self, i: int) -> tuple[str, Item, str, Condition, int]:
        if not 0 <= i < self.n_sessions:
            raise IndexError(i)
        for start, n, idx, _, _ in self._blocks:
            if i < start + n:
                break
        per_unit = len(self.levels) * len(idx) * self.trials
        unit, rest = divmod(i - start, per_unit)
        lvl, rest = divmod(rest, len(idx) * self.trials)
        cnd, trial = divmod(rest, self.trials)
        task, item = self.units[unit]
        return task, item, self.levels[lvl], self.conditions[idx[cnd]], trial

    def session_id(self, i: int) -> str:
        task, item, level, cond, trial = self._coords(i)
        return session_id(task, item.id, level, cond.name, trial)

    def session(self, i: int) -> SessionSpec:
        task, item, level, cond, trial = self._coords(i)
        sid = session_id(task, item.id, level, cond.name, trial)
        return SessionSpec(
            session_id=sid,
            task=task,
            item_id=item.id,
            knowledge_level=level,
            condition=cond.name,
            assistant_model=cond.assistant,
            assistant_strategy=cond.strategy,  # type: ignore[arg-type]
            simulator=cond.simulator,  # type: ignore[arg-type]
            trial=trial,
            seed=derive_seed(self.run_seed, sid),
            init_seed=derive_seed(self.run_seed, f"init/{task}/{item.id}/{level}/{trial}"),
            initial_ks=self._cached_state(task, item.id, level),
        )

    def _cached_state(self, task: str, item_id: str, level: str) -> Mapping | None:
        cache = self.init_caches.get(task)
        if cache is None:
            return None
        hit = cache.lookup(INIT_CACHE_TASK_KEYS.get(task, task), item_id, level)
        return copy.deepcopy(hit) if hit is not None else None

    def shard_range(self, index: int) -> range:
        start, n, _, first, _ = self._blocks[self.shard_group(index)]
        lo = start + (index - first) * self.shard_size
        return range(lo, min(lo + self.shard_size, start + n))

    def shard_session_ids(self, index: int) -> list[str]:
        return [self.session_id(i) for i in self.shard_range(index)]

    def shard(self, index: int, only: Iterable[str] | None = None, reseed: Mapping[str, int] | None = None) -> ShardSpec:
        """Shard ``index``; with ``only``, just those of its sessions (what is left to run);
        ``reseed``: session id -> attempt, for reruns that draw a new seed (:func:`rerun_seed`)."""
        if not 0 <= index < self.n_shards:
            raise IndexError(index)
        wanted = set(only) if only is not None else None
        sessions = tuple(s for s in (self.session(i) for i in self.shard_range(index)) if wanted is None or s.session_id in wanted)
        if reseed:
            sessions = tuple(dataclasses.replace(s, seed=rerun_seed(self.run_seed, s.session_id, reseed[s.session_id]))
                             if s.session_id in reseed else s for s in sessions)
        keys = {s.item_key for s in sessions}
        items = {item_key(t, it.id): it for t, it in self.units if item_key(t, it.id) in keys}
        return ShardSpec(
            shard_id=shard_name(index),
            index=index,
            sessions=sessions,
            items=items,
            graphs={k: self.graphs[k] for k in keys},
        )

    def iter_sessions(self) -> Iterator[SessionSpec]:
        return (self.session(i) for i in range(self.n_sessions))

    @property
    def fingerprint(self) -> str:
        """The cut of the plan (shard size, condition groups): recorded in the manifest and in every
        commit marker. Resume is per session, so a different cut redoes and double-counts nothing."""
        blob = json.dumps({"shard_size": self.shard_size, "condition_groups": self.condition_groups}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def summary(self) -> dict:
        tasks: dict[str, int] = {}
        for t, _ in self.units:
            tasks[t] = tasks.get(t, 0) + 1
        return {
            "n_sessions": self.n_sessions,
            "n_shards": self.n_shards,
            "shard_size": self.shard_size,
            "fingerprint": self.fingerprint,
            "items_per_task": tasks,
            "levels": self.levels,
            "conditions": [c.name for c in self.conditions],
            "trials": self.trials,
            **({"condition_groups": self.condition_groups} if len(self.condition_groups) > 1 else {}),
        }


__all__ = ["Condition", "Inputs", "Plan", "derive_seed", "load_inputs", "rerun_seed", "session_id", "shard_name"]
