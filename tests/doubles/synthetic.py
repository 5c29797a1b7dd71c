"""A synthetic run directory in the results contract (``schema/results.py``): a TEST DOUBLE.

It lives under ``tests/`` because its numbers come from random draws, not a simulation: it must
never be mistaken for results. Tests and the sweep benchmark's workload use it.

Why: the report (and later the engine's own tests) need run directories of any size without an
LLM. Conversations are made by drawing per-turn signals at random (how many IUs the assistant
mentions and how well depends on the condition) and pushing them through the real rules
(``rules.trajectory``), so states, loads, failure modes and metrics are mutually consistent.
Messages are filler text of realistic length. Large runs reuse a bounded set of simulated
templates under fresh session ids so that writing 10,000 conversations takes seconds.

Depends only on model/ and rules/ (never on report/), so other layers may reuse it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.io.parquet import arrow_schema
from ray_knowsim.schema.graph import IUGraph, build_index, capacity
from ray_knowsim.schema.results import SessionRow, TurnRow
from ray_knowsim.schema.signals import SignalEntry
from ray_knowsim.schema.states import KNOWLEDGE_LEVELS
from ray_knowsim.rules.config import reference_rules
from ray_knowsim.rules.init_state import sample_initial_states
from ray_knowsim.rules.prerequisites import in_zpd
from ray_knowsim.rules.trajectory import run_trajectory
from ray_knowsim.rules.update import apply_turn
from tests.doubles.graphs import random_graph

#: a condition's behaviour: mean IUs mentioned per turn, share explained well, share aimed at the ZPD
DEFAULT_CONDITIONS: dict[str, tuple[float, float, float]] = {
    "model-a:adaptive": (2.5, 0.75, 0.8),
    "model-a:comprehensive": (6.0, 0.6, 0.4),
    "model-b:socratic": (1.5, 0.5, 0.6),
}
BASELINE_CONDITION = "model-a:adaptive@zero-shot-cot"
#: text a test can look for: it must show up escaped, never run
HTML_PROBE = '<script>window.__probe = 1;</script><b>bold?</b> & "quotes" < > \'single\''

_WORDS = (
    "slope intercept ratio fraction numerator denominator variable equation factor product sum "
    "integer prime divisor multiple exponent base root square angle triangle area perimeter radius "
    "probability event outcome sample mean median evidence source claim dosage contract liability "
    "enzyme protein cell membrane voltage current resistance"
).split()
_FILLER = (
    "Let us take this one step at a time. Notice how the pieces fit together here. "
    "A quick example makes the idea concrete. Try to predict the next step before reading on. "
    "This matters because the later steps build on it. Here is a common mistake to avoid. "
    "If that felt fast, we can slow down and revisit it. Think about what stays the same. "
).rstrip(". ").split(". ")


SESSION_SCHEMA = arrow_schema(SessionRow)
TURN_SCHEMA = arrow_schema(TurnRow)
_SESSION_DEFAULTS = {k: f.default for k, f in SessionRow.model_fields.items() if not f.is_required()}
_TURN_DEFAULTS = {k: f.default for k, f in TurnRow.model_fields.items() if not f.is_required()}


@dataclass
class SyntheticRun:
    run_dir: Path
    n_sessions: int
    n_turn_rows: int
    conditions: list[str]
    levels: list[str]
    session_files: list[Path] = field(default_factory=list)
    turn_files: list[Path] = field(default_factory=list)


def _graph(rng: random.Random, item: int) -> IUGraph:
    n = rng.randint(8, 13)
    concepts = rng.sample(_WORDS, n)
    return random_graph(rng, n, concepts=concepts, knowledge_areas=[f"synthetic area {item}"])


def _text(rng: random.Random, lead: str, chars: int) -> str:
    parts = [lead]
    size = len(lead)
    while size < chars:
        s = rng.choice(_FILLER) + "."
        parts.append(s)
        size += len(s) + 1
    return " ".join(parts)


def _turn_signals(rng, index, state, behaviour) -> list[SignalEntry]:
    rate, well, focus = behaviour
    k = min(len(index.ids), max(0, int(rng.gauss(rate, 1.0) + 0.5)))
    zpd = [v for v in index.ids if in_zpd(index, v, state)]
    chosen: list[str] = []
    for _ in range(k):
        pool = zpd if zpd and rng.random() < focus else list(index.ids)
        pool = [v for v in pool if v not in chosen] or [v for v in index.ids if v not in chosen]
        chosen.append(rng.choice(pool))
    entries = []
    for v in index.ids:
        concept = index.label_of(v).split(": ", 1)[-1]
        tq = ("well_explained" if rng.random() < well else "shallow") if v in chosen else "not_mentioned"
        attempt = rng.choices(("none", "reasoning", "articulation"), (0.8, 0.12, 0.08))[0]
        entries.append(
            SignalEntry(
                id=v,
                concept=concept,
                teaching_quality=tq,
                teaching_quality_reasoning=f"{concept}: {tq.replace('_', ' ')}" if tq != "not_mentioned" else "",
                user_attempt_type=attempt,
                user_attempt_reasoning="the learner tried it" if attempt != "none" else "",
                assistant_response_role="confirmed_correct" if attempt == "reasoning" else "not_applicable",
            )
        )
    return entries


def _simulate(rng: random.Random, graph: IUGraph, item_id: str, level: str, behaviour, max_turns: int, chars, probe: bool):
    """One structured conversation: (session fields, list of turn fields)."""
    rules = reference_rules()
    index = build_index(graph, item_id)
    initial = sample_initial_states(index, level, rules, rng)
    tau = capacity(index.size, rules.capacity_ratio, rules.capacity_floor)
    signal_lists, state, carries = [], initial, {}
    for t in range(1, max_turns + 1):  # signals depend on the state: step the rules turn by turn
        entries = _turn_signals(rng, index, state, behaviour)
        signal_lists.append(entries)
        upd = apply_turn(index, state, carries, entries, tau, t, rules, max_turns)
        state, carries = upd.post, upd.carries
    traj = run_trajectory(index, initial, signal_lists, rules, max_turns=max_turns)
    summary = traj.summary(rules)
    turns = []
    for t, (upd, met, entries) in enumerate(zip(traj.updates, traj.metrics, traj.entries), start=1):
        named = [index.label_of(e.id).split(": ", 1)[-1] for e in entries if e.mentioned]
        user = _text(rng, f"Turn {t}: I am not sure I get {rng.choice(named) if named else 'this'} yet.", chars[0] // 4)
        if probe and t == 1:
            user = f"{user} {HTML_PROBE}"
        lead = "Let's look at " + (", ".join(named) if named else "the question again") + "."
        assistant = _text(rng, lead, rng.randint(*chars))
        fm = met.failure_modes
        turns.append(
            {
                "turn": t,
                "user_message": user,
                "assistant_message": assistant,
                "signals_json": json.dumps([e.model_dump() for e in entries]),
                "states": [upd.post[v] for v in index.ids],
                "carries": [float(upd.carries.get(v, 0.0)) for v in index.ids],
                "comprehension_load": upd.comprehension_load,
                "attempt_load": upd.attempt_load,
                "effective_load": upd.effective_load,
                "overload": upd.overload,
                "eta": upd.eta,
                "n_upward_transitions": met.n_upward_transitions,
                "absorbed_gain": met.absorbed_gain,
                "ic_numerator": met.ic_numerator,
                "ic_denominator": met.ic_denominator,
                "zpd_size": met.zpd_size,
                "absorbed_ic_numerator": met.absorbed_ic_numerator,
                "new_ius": met.new_ius,
                "disallowed": met.disallowed,
                "familiarity": met.familiarity,
                "novelty": met.novelty,
                "engagement": met.engagement,
                "density": 0.0,
                **{f"fm_{k}": int(fm.get(k, 0)) for k in ("redundant", "prereq_blocked", "effective", "overload_wasted", "under_absorbed")},
            }
        )
    session = {k: summary.get(k) for k in summary}
    session.update(
        {
            "graph_size": index.size,
            "tau": traj.tau,
            "iu_labels": list(index.labels),
            "initial_states": [initial[v] for v in index.ids],
            "graph_json": json.dumps(graph.to_json_dict()),
            "turns": len(turns),
            "stop_reason": "max_turns",
        }
    )
    for k in ("redundant", "prereq_blocked", "effective", "overload_wasted", "under_absorbed"):
        session[f"fm_{k}"] = sum(t[f"fm_{k}"] for t in turns)
    return session, turns


def _baseline(rng: random.Random, max_turns: int, chars):
    turns = [
        {
            "turn": t,
            "user_message": _text(rng, f"Turn {t}: can you explain that differently?", chars[0] // 4),
            "assistant_message": _text(rng, "Sure, here is another angle.", rng.randint(*chars)),
            "signals_json": "[]",
            "states": [],
            "carries": [],
            **dict.fromkeys(("comprehension_load", "attempt_load", "effective_load", "eta", "absorbed_gain"), 0.0),
            "overload": False,
            **dict.fromkeys(("n_upward_transitions", "ic_numerator", "ic_denominator", "zpd_size", "absorbed_ic_numerator", "new_ius", "disallowed"), 0),
            **dict.fromkeys(("familiarity", "novelty", "engagement", "density"), 0.0),
        }
        for t in range(1, rng.randint(2, max_turns) + 1)
    ]
    session = {"graph_size": 0, "tau": 0, "iu_labels": [], "initial_states": [], "graph_json": "{}", "turns": len(turns), "stop_reason": "user_terminated"}
    return session, turns


def write_synthetic_run(
    run_dir: str | Path,
    *,
    n_sessions: int = 90,
    conditions: dict[str, tuple[float, float, float]] | None = None,
    levels: tuple[str, ...] = KNOWLEDGE_LEVELS,
    max_turns: int = 8,
    seed: int = 0,
    max_templates: int = 240,
    sessions_per_file: int = 1000,
    message_chars: tuple[int, int] = (300, 1200),
    failed_share: float = 0.0,
    with_judge: bool = True,
    baseline: bool = False,
    html_probe: bool = False,
    run_id: str = "synthetic",
    validate: bool = True,
) -> SyntheticRun:
    """Write ``run_dir/sessions/part-*.parquet`` and ``run_dir/turns/part-*.parquet``.

    Sessions are spread round-robin over (level, condition) cells. Up to ``max_templates``
    conversations are simulated; beyond that, sessions reuse them under new ids and trials.
    ``validate`` checks every distinct row against the pydantic contract models.
    """
    conds = dict(conditions or DEFAULT_CONDITIONS)
    names = list(conds) + ([BASELINE_CONDITION] if baseline else [])
    cells = [(lv, c) for lv in levels for c in names]
    rng = random.Random(seed)
    n_items = 4
    graphs = [_graph(rng, i) for i in range(n_items)]
    run_dir = Path(run_dir)
    (run_dir / "sessions").mkdir(parents=True, exist_ok=True)
    (run_dir / "turns").mkdir(parents=True, exist_ok=True)

    templates: dict[tuple[int, int], tuple[dict, pa.Table]] = {}
    per_cell = max(1, max_templates // len(cells))
    trials: dict[tuple[str, str, str], int] = {}
    out = SyntheticRun(run_dir, 0, 0, names, list(levels))
    sess_buf: list[dict] = []
    turn_buf: list[pa.Table] = []
    sid_col = TURN_SCHEMA.get_field_index("session_id")

    def flush() -> None:
        part = len(out.session_files)
        path = run_dir / "sessions" / f"part-{part:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(sess_buf, schema=SESSION_SCHEMA), path, row_group_size=4096)
        out.session_files.append(path)
        if turn_buf:
            path = run_dir / "turns" / f"part-{part:05d}.parquet"
            turns = pa.concat_tables(turn_buf)
            # a large dictionary page keeps repeated template messages cheap to write and small on disk
            pq.write_table(turns, path, row_group_size=4096, dictionary_pagesize_limit=8 << 20)
            out.turn_files.append(path)
            out.n_turn_rows += turns.num_rows
        sess_buf.clear()
        turn_buf.clear()

    for i in range(n_sessions):
        cell, j = i % len(cells), i // len(cells)
        level, cond = cells[cell]
        key = (cell, j % per_cell)  # a template always belongs to one (level, condition) cell
        item = key[1] % n_items
        item_id = f"synth_{item:03d}"
        fresh = key not in templates
        if fresh:
            srng = random.Random(f"{seed}/{cell}/{key[1]}")
            if cond == BASELINE_CONDITION:
                base, base_turns = _baseline(srng, max_turns, message_chars)
            else:
                probe = html_probe and i == 0
                base, base_turns = _simulate(srng, graphs[item], item_id, level, conds[cond], max_turns, message_chars, probe)
            trows = [{**_TURN_DEFAULTS, "run_id": run_id, "session_id": "", **t} for t in base_turns]
            if validate:
                for trow in trows:
                    TurnRow.model_validate(trow)
            templates[key] = (base, pa.Table.from_pylist(trows, schema=TURN_SCHEMA))
        base, base_table = templates[key]
        trial = trials.get((item_id, level, cond), 0)
        trials[(item_id, level, cond)] = trial + 1
        sid = f"synthetic/{item_id}/{level}/{cond}/{trial}"
        model, _, strategy = cond.partition(":")
        is_baseline = cond == BASELINE_CONDITION
        failed = rng.random() < failed_share
        row = {
            "run_id": run_id,
            "config_hash": "0" * 16,
            "session_id": sid,
            "task": "synthetic",
            "item_id": item_id,
            "knowledge_level": level,
            "condition": cond,
            "assistant_model": model,
            "assistant_strategy": strategy.split("@")[0],
            "simulator": "zero-shot-cot" if is_baseline else "structured",
            "trial": trial,
            "seed": seed,
            "rules_preset": "reference",
            **base,
            "status": "ok",
        }
        if with_judge:
            behaviour = conds.get(cond, (3.0, 0.6, 0.6))
            row["iq"] = round(min(10.0, max(1.0, rng.gauss(4 + 5 * behaviour[1] * behaviour[2], 1.2))), 1)
        if failed:  # identity kept, no outcome, no turns
            keep = {k: row[k] for k in list(row)[:13] + ["graph_size", "tau", "iu_labels", "initial_states", "graph_json"]}
            row = {**keep, "status": "failed", "turns": 0, "stop_reason": "error", "error": "synthetic failure"}
        if validate and (fresh or failed):
            SessionRow.model_validate(row)
        sess_buf.append({**_SESSION_DEFAULTS, **row})
        if not failed and base_table.num_rows:
            turn_buf.append(base_table.set_column(sid_col, "session_id", pa.array([sid] * base_table.num_rows, pa.string())))
        out.n_sessions += 1
        if len(sess_buf) >= sessions_per_file:
            flush()
    if sess_buf or not out.session_files:
        flush()
    return out
