"""The sweep tests' inputs: a small run directory built from ``rules.trajectory`` outputs and
committed through the engine's writer (``io.commits.write_commit``), and sweep configs over it.

Why our own builder (not the report's synthetic runs): the sweep tests need the awkward cases a
real run produces -- conversations of different lengths, signals naming ids outside the graph or
without an id, duplicated ids, confirmed-incorrect attempts, sessions recorded under non-default
rules -- and must know exactly which rules produced the recorded metrics.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from ray_knowsim.io.commits import SESSION_SCHEMA, TURN_SCHEMA, write_commit
from ray_knowsim.schema.graph import build_index
from ray_knowsim.schema.results import FAILURE_MODES, SessionRow, TurnRow
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.rules.config import RuleConfig, reference_rules
from ray_knowsim.rules.init_state import sample_initial_states
from ray_knowsim.rules.trajectory import run_trajectory
from tests.doubles.graphs import random_graph

CONDITIONS = {"m-a:adaptive": (2.0, 0.8), "m-a:comprehensive": (5.0, 0.6), "m-b:socratic": (1.2, 0.5)}
LEVELS = ("novice", "intermediate", "advanced")
#: the config hash of the rows and of their commits
CONFIG_HASH = "0"


def random_turn(rng: random.Random, ids: list[str], rate: float, well: float) -> list[SignalEntry]:
    k = max(0, min(len(ids), int(rng.gauss(rate, 1.5) + 0.5)))
    chosen = set(rng.sample(ids, k))
    out = []
    for v in ids:
        tq = ("well_explained" if rng.random() < well else "shallow") if v in chosen else "not_mentioned"
        attempt = rng.choices(("none", "reasoning", "articulation"), (0.75, 0.15, 0.1))[0]
        role = rng.choice(("confirmed_correct", "confirmed_incorrect_no_explanation")) if attempt == "reasoning" else "not_applicable"
        out.append(SignalEntry(id=v, teaching_quality=tq, user_attempt_type=attempt, assistant_response_role=role))
    if rng.random() < 0.2:  # an id outside the graph, an entry without id, a duplicated id
        out.append(SignalEntry(id="IU99", teaching_quality="well_explained"))
        out.append(SignalEntry(id=None, user_attempt_type="reasoning"))
        out.append(SignalEntry(id=ids[0], teaching_quality="well_explained"))
    return out


def write_run(run_dir: Path, *, n_items: int = 3, trials: int = 2, seed: int = 0, rules: RuleConfig | None = None) -> list[dict]:
    """Sessions for every (item, level, condition, trial) plus one baseline and one failed session.

    Returns the session rows written (``SessionRow`` dicts)."""
    rules = rules or reference_rules()
    rng = random.Random(seed)
    graphs = [random_graph(rng, rng.randint(6, 12)) for _ in range(n_items)]
    sessions, turns = [], []
    for i, graph in enumerate(graphs):
        g = build_index(graph, f"item{i}")
        for level in LEVELS:
            for cond, (rate, well) in CONDITIONS.items():
                for trial in range(trials):
                    n_turns = rng.randint(3, 9)
                    initial = sample_initial_states(g, level, rules, rng)
                    signals = [random_turn(rng, list(g.ids), rate, well) for _ in range(n_turns)]
                    traj = run_trajectory(g, initial, signals, rules)
                    sid = f"synthetic/item{i}/{level}/{cond}/{trial}"
                    fm = {m: sum(t.failure_modes[m] for t in traj.metrics) for m in FAILURE_MODES}
                    row = SessionRow(
                        run_id="t", config_hash=CONFIG_HASH, session_id=sid, task="synthetic", item_id=f"item{i}",
                        knowledge_level=level, condition=cond, assistant_model=cond.split(":")[0],
                        assistant_strategy=cond.split(":")[1], simulator="structured", trial=trial, seed=seed,
                        rules_preset=rules.preset, graph_size=g.size, tau=traj.tau, iu_labels=list(g.labels),
                        initial_states=[initial[v] for v in g.ids], graph_json=json.dumps(graph.to_json_dict()),
                        status="ok", turns=n_turns, stop_reason="max_turns", **traj.summary(rules),
                        **{f"fm_{m}": n for m, n in fm.items()},
                    )  # fmt: skip
                    sessions.append(row.model_dump())
                    for t, (u, m, e) in enumerate(zip(traj.updates, traj.metrics, traj.entries), start=1):
                        turns.append(
                            TurnRow(
                                run_id="t", session_id=sid, turn=t, user_message="u", assistant_message="a",
                                signals_json=json.dumps([x.model_dump() for x in e]), states=[u.post[v] for v in g.ids],
                                carries=[u.carries.get(v, 0.0) for v in g.ids], comprehension_load=u.comprehension_load,
                                attempt_load=u.attempt_load, effective_load=u.effective_load, overload=u.overload, eta=u.eta,
                                n_upward_transitions=m.n_upward_transitions, absorbed_gain=m.absorbed_gain,
                                ic_numerator=m.ic_numerator, ic_denominator=m.ic_denominator, zpd_size=m.zpd_size,
                                absorbed_ic_numerator=m.absorbed_ic_numerator, new_ius=m.new_ius, disallowed=m.disallowed,
                                familiarity=m.familiarity, novelty=m.novelty, engagement=m.engagement, density=0.0,
                            ).model_dump()  # fmt: skip
                        )
    base = dict(sessions[0])
    baseline = base | {"session_id": "synthetic/baseline/0", "simulator": "zero-shot-cot", "condition": "baseline",
                       "initial_states": [], "graph_json": "{}", "iu_labels": []}  # fmt: skip
    failed = base | {"session_id": "synthetic/failed/0", "status": "failed", "stop_reason": "error", "turns": 0}
    sessions += [baseline, failed]
    # two commits, rows out of order (the reader must rely on neither), each through the engine's writer
    rng.shuffle(turns)
    half = len(sessions) // 2
    for shard, part in enumerate((sessions[half:], sessions[:half])):
        named = {row["session_id"] for row in part}
        write_commit(run_dir, shard_id=f"shard-{shard:06d}", config_hash=CONFIG_HASH,
                     sessions=pa.Table.from_pylist(part, schema=SESSION_SCHEMA),
                     turns=pa.Table.from_pylist([t for t in turns if t["session_id"] in named], schema=TURN_SCHEMA))
    return sessions[:-2]


def run_dir_config(run_dir: Path, out: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"name": "t", "source": {"run_dir": str(run_dir)}, "output": str(out)}
    cfg.update(extra)
    return cfg


def reference_config(shared_ref: Path, out: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": "ref",
        "source": {
            "records": [str(shared_ref / "examples" / "*.json")],
            "graph_cache": [str(shared_ref / "iu_cache" / "math.json")],
        },
        "output": str(out),
    }
    cfg.update(extra)
    return cfg
