"""Fit a run's self-hosted models on the cluster's GPUs before anything starts (no Ray here).

The model mirrors how Ray places them: a replica with ``num_gpus < 1`` takes that share of one GPU
(Ray packs fractional GPU requests onto GPU instances); a replica with ``num_gpus >= 1`` takes
``tensor_parallel_size`` whole GPUs in a placement group, all on one node unless the entry says
``multi_node`` (then vLLM's Ray executor spreads its workers). CPUs are checked per node too.

When every model of the run fits at once there is one group. Otherwise the conditions are grouped
by assistant (first fit, assistants in config order), so that the role models (simulator, extractor, judge) plus one
group's assistants fit; the run then executes group by group, starting and stopping the
assistants' pools in between. A model that does not fit even alone is an error, with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ray_knowsim.backends.vllm.config import VLLMModelConfig

EPS = 1e-9


class PlacementError(ValueError):
    """The models cannot be placed on this cluster (message says which and why)."""


@dataclass
class Node:
    name: str
    gpus: int
    cpus: float
    gpu_free: list[float] = field(default_factory=list)
    cpu_free: float = 0.0

    def fresh(self) -> "Node":
        return Node(self.name, self.gpus, self.cpus, [1.0] * self.gpus, self.cpus)


@dataclass(frozen=True)
class Slot:
    """Where one replica went: node and GPU indices (with the share taken of each)."""

    model: str
    replica: int
    node: str
    gpus: tuple[int, ...]
    share: float


def nodes_from_ray(ray_nodes: Iterable[Mapping]) -> list[Node]:
    """``ray.nodes()`` rows -> nodes (alive ones)."""
    out = []
    for n in ray_nodes:
        if not n.get("Alive", True):
            continue
        res = n.get("Resources", {})
        out.append(Node(str(n.get("NodeManagerAddress") or n.get("NodeID", "node"))[:40] + f"/{str(n.get('NodeID', ''))[:6]}",
                        int(res.get("GPU", 0) + EPS), float(res.get("CPU", 0))))
    return out


def _place_one(key: str, r: int, cfg: VLLMModelConfig, nodes: list[Node]) -> Slot | None:
    need_cpu = cfg.num_cpus
    if cfg.num_gpus == 0:
        for n in nodes:
            if n.cpu_free + EPS >= need_cpu:
                n.cpu_free -= need_cpu
                return Slot(key, r, n.name, (), 0.0)
        return None
    if cfg.fractional:  # best fit: the fullest GPU that still has room
        best = None
        for n in nodes:
            if n.cpu_free + EPS < need_cpu:
                continue
            for g, free in enumerate(n.gpu_free):
                if free + EPS >= cfg.num_gpus and (best is None or free < best[2]):
                    best = (n, g, free)
        if best is None:
            return None
        n, g, _ = best
        n.gpu_free[g] -= cfg.num_gpus
        n.cpu_free -= need_cpu
        return Slot(key, r, n.name, (g,), cfg.num_gpus)
    tp = cfg.whole_gpus()
    # one node first (STRICT_PACK): the node with the fewest whole GPUs that suffices
    candidates = sorted((n for n in nodes if n.cpu_free + EPS >= need_cpu), key=lambda n: sum(f >= 1 - EPS for f in n.gpu_free))
    for n in candidates:
        whole = [g for g, f in enumerate(n.gpu_free) if f >= 1 - EPS]
        if len(whole) >= tp:
            for g in whole[:tp]:
                n.gpu_free[g] = 0.0
            n.cpu_free -= need_cpu
            return Slot(key, r, n.name, tuple(whole[:tp]), 1.0)
    if cfg.multi_node:
        free = [(n, g) for n in nodes for g, f in enumerate(n.gpu_free) if f >= 1 - EPS]
        hosts = [n for n in nodes if n.cpu_free + EPS >= need_cpu]
        if len(free) >= tp and hosts:
            for n, g in free[:tp]:
                n.gpu_free[g] = 0.0
            hosts[0].cpu_free -= need_cpu
            return Slot(key, r, "+".join(sorted({n.name for n, _ in free[:tp]})), tuple(g for _, g in free[:tp]), 1.0)
    return None


def fit(models: Mapping[str, VLLMModelConfig], nodes: Sequence[Node], first: Sequence[str] = ()) -> list[Slot] | None:
    """Place every replica of ``models`` on fresh ``nodes``; None if they do not fit. The ``first``
    keys (the role models, up for the whole run) go first, so they land on the same GPUs in every
    group's fit, as they do on the cluster; then the rest, largest first."""
    state = [n.fresh() for n in nodes]
    order = sorted(((k, r) for k, m in models.items() for r in range(m.replicas)),
                   key=lambda kr: (kr[0] not in first, -models[kr[0]].whole_gpus(), -models[kr[0]].num_gpus,
                                   -models[kr[0]].num_cpus, kr))
    slots = []
    for k, r in order:
        s = _place_one(k, r, models[k], state)
        if s is None:
            return None
        slots.append(s)
    return slots


def _describe(models: Mapping[str, VLLMModelConfig]) -> str:
    return ", ".join(f"{k} ({m.replicas} x {m.num_gpus:g} GPU{'' if m.tp == 1 else f', tp {m.tp}'})" for k, m in models.items())


def _capacity(nodes: Sequence[Node]) -> str:
    return ", ".join(f"{n.name}: {n.gpus} GPU / {n.cpus:g} CPU" for n in nodes) or "no nodes"


@dataclass
class Group:
    conditions: list[str]
    assistants: list[str]  # model keys only this group needs
    models: list[str]  # every self-hosted model key running during the group (shared ones too)
    slots: list[Slot]


@dataclass
class PlacementPlan:
    groups: list[Group]
    shared: list[str]  # self-hosted role models running for the whole run
    nodes: list[Node]
    models: dict[str, VLLMModelConfig] = field(default_factory=dict)

    @property
    def grouped(self) -> bool:
        return len(self.groups) > 1

    def condition_groups(self) -> list[list[str]]:
        return [g.conditions for g in self.groups]

    def render(self) -> str:
        models = self.models
        lines = [f"cluster: {_capacity(self.nodes)}"]
        if not models:
            lines.append("no self-hosted (vllm) models: nothing to place")
            return "\n".join(lines)
        lines.append(f"self-hosted models: {_describe(models)}")
        lines.append("all models fit at once: one group" if not self.grouped else
                     f"the models do not all fit at once: {len(self.groups)} groups, run one after another "
                     f"(role models {self.shared or '[]'} stay up; assistants start and stop per group)")
        for i, g in enumerate(self.groups):
            lines.append(f"group {i}: conditions {g.conditions}; models {g.models}")
            for s in sorted(g.slots, key=lambda s: (s.node, s.gpus, s.model, s.replica)):
                where = f"GPU {','.join(map(str, s.gpus))}" + (f" ({s.share:g})" if 0 < s.share < 1 else "") if s.gpus else "CPU only"
                lines.append(f"  {s.model}[{s.replica}] -> {s.node} {where}")
        return "\n".join(lines)


def plan_placement(models: Mapping[str, VLLMModelConfig], shared: Sequence[str],
                   conditions: Sequence[tuple[str, str]], nodes: Sequence[Node]) -> PlacementPlan:
    """``models``: the run's self-hosted models by key; ``shared``: keys the roles use (needed by
    every group); ``conditions``: (condition name, assistant key) in config order."""
    nodes = list(nodes)
    for k, m in models.items():
        if fit({k: m}, nodes) is None:
            raise PlacementError(f"model {k} ({_describe({k: m})}) does not fit on this cluster ({_capacity(nodes)})")
    all_slots = fit(models, nodes, shared)
    if all_slots is not None:
        return PlacementPlan([Group([c for c, _ in conditions], sorted({a for _, a in conditions if a in models}),
                                    list(models), all_slots)], [k for k in models if k in shared], nodes, dict(models))
    shared_models = {k: models[k] for k in models if k in shared}
    if fit(shared_models, nodes, shared) is None:
        raise PlacementError(f"the role models {_describe(shared_models)} do not fit together on this cluster ({_capacity(nodes)})")
    by_assistant: dict[str, list[str]] = {}
    for c, a in conditions:
        by_assistant.setdefault(a, []).append(c)
    groups: list[Group] = []  # first fit: an assistant joins the first group it fits into
    for a, conds in by_assistant.items():
        extra = [a] if a in models and a not in shared_models else []
        for g in groups:
            trial = fit({**shared_models, **{k: models[k] for k in g.assistants + extra}}, nodes, shared)
            if trial is not None:
                g.assistants += extra
                g.models += extra
                g.conditions += conds
                g.slots = trial
                break
        else:
            trial = fit({**shared_models, **{k: models[k] for k in extra}}, nodes, shared)
            if trial is None:
                raise PlacementError(f"assistant {a} does not fit next to the role models {list(shared_models)} ({_capacity(nodes)})")
            groups.append(Group(list(conds), list(extra), list(shared_models) + extra, trial))
    return PlacementPlan(groups, list(shared_models), nodes, dict(models))


__all__ = ["Group", "Node", "PlacementError", "PlacementPlan", "Slot", "fit", "nodes_from_ray", "plan_placement"]
