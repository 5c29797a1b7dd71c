#!/usr/bin/env python
"""Write a small synthetic human-study dataset in the KnowChat release format, a matching
simulated run, and the planted answer.

Formats (--format): ``card`` (default) is the layout the dataset card describes
(ray_knowsim/validate/knowchat_layout.yaml): ``{task}_{arm}_conversations.jsonl`` and a workbook
``{task}_{arm}.xlsx`` with the sheets summary, background, prescreening (items Q1-Q10),
pretest/posttest (math only, items Q1-Q7 per session), main, survey and questions (ExpertQA only;
records refer to it by an integer row index, MathQA records carry no ``questions``). ``legacy`` is
the older layout (``knowchat_{arm}_{task}``, all seven sheets, ``score`` + ``max score`` columns,
question ids as lists of text).

Planting. For every (arm, task, level, metric) group each condition gets a human "goodness"
g in {0, 1, 2} (a permutation of 0..2, or with probability --tie-rate two conditions tied).
Human ratings come from disjoint bands per g (CO bands reversed: low overload is good), so every
pair of conditions has Cliff's delta exactly +-1 (different g) or 0 (tied): the high-signal pairs
are known for any threshold in (0, 1]. For each simulator a simulated goodness order is then
chosen per group so that exactly round(agreement * n) of the n high-signal pairs agree in sign;
sim cell means follow that order. ``planted.json`` holds the resulting k/n per grouping, counted
here from the planted orders (not by the validator). Conversations mention IUs {0, 1, 2} of
their item (human) and {1, 2, 3} (simulated), so every coverage cell has Jaccard 0.5.

    python scripts/make_synthetic_knowchat.py --out /tmp/kc --sim-out /tmp/run --agreement 0.75
    ray-knowsim validate --human /tmp/kc --inspect
"""

from __future__ import annotations

import argparse
import json
import random
from itertools import combinations, permutations
from pathlib import Path
from types import UnionType
from typing import Union, get_args, get_origin

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq

from ray_knowsim.schema.results import SessionRow, TurnRow
from ray_knowsim.validate.conditions import ARMS, CONDITION_CODES, LEVELS, METRIC_TASKS, METRICS, TASKS

LIKERT_BANDS = {0: (1, 2), 1: (3, 4), 2: (6, 7)}  # goodness -> ratings (DC, IQ; CO reversed)
KG_POST_BANDS = {0: (3, 4), 1: (6, 7), 2: (9, 10)}  # goodness -> posttest score (pretest 2 of 10)
PRE_SCORE, MAX_SCORE = 2, 10
CARD_KG_POST_BANDS = {0: (2, 3), 1: (4, 5), 2: (6, 7)}  # card layout: tests of 7 items, pretest 1 of 7
CARD_PRE_SCORE, CARD_TEST_ITEMS, CARD_PRESCREEN_ITEMS = 1, 7, 10
PRESCREEN = {"novice": 2, "intermediate": 5, "advanced": 9}  # of 10; default cuts 0.4 / 0.7
STRATEGY_ARM_MODEL = "gpt-5.4"
SIM_STRATEGIES = ("socratic", "adaptive", "comprehensive")  # code order
MODEL_ARM_STRATEGY = "validation_study_minimal"
SIM_MODELS = ("gpt-5.4", "gemini-3-pro-preview", "claude-opus-4-7")  # code order
ITEM_CONCEPTS = {
    "math": [
        ["binomial coefficient", "factorial notation", "multiplication principle", "favorable outcomes ratio"],
        ["quadratic discriminant", "vertex form", "completing squares", "parabola symmetry axis"],
        ["modular arithmetic", "prime factorization", "greatest common divisor", "euclidean algorithm"],
    ],
    "expertqa": [
        ["urban densification", "zoning entitlements", "infill development", "transit corridors"],
        ["antibiotic resistance", "bacterial mutation", "selective pressure", "stewardship programs"],
        ["contract consideration", "offer acceptance", "promissory estoppel", "breach remedies"],
    ],
}
FILLER_USER = "Could you help me understand this question?"
FILLER_SIM_USER = "I am not sure I follow yet."


def items(task: str) -> list[tuple[str, list[str]]]:
    return [(f"{task}_{i + 1:03d}", concepts) for i, concepts in enumerate(ITEM_CONCEPTS[task])]


def graph_json(concepts: list[str]) -> str:
    nodes = [{"id": f"IU{i + 1}", "concept": c, "description": c} for i, c in enumerate(concepts)]
    edges = [{"from": f"IU{i}", "to": f"IU{i + 1}"} for i in range(1, len(concepts))]
    return json.dumps({"knowledge_areas": [], "nodes": nodes, "edges": edges})


def groups() -> list[tuple[str, str, str, str]]:
    return [(a, t, lv, m) for a in ARMS for t in TASKS for lv in LEVELS for m in METRICS if t in METRIC_TASKS[m]]


def _agreements(human: tuple[int, ...], sim: tuple[int, ...]) -> list[tuple[int, int, bool]]:
    """(a, b, agree) for the high-signal pairs (different human goodness)."""
    sgn = lambda v: (v > 0) - (v < 0)  # noqa: E731
    return [(a, b, sgn(human[a] - human[b]) == sgn(sim[a] - sim[b])) for a, b in combinations(range(3), 2) if human[a] != human[b]]


def make_plan(seed: int, agreement: dict[str, float], tie_rate: float, metrics_of: dict[str, tuple[str, ...]]) -> dict:
    """Human goodness per group, sim goodness per (simulator, group), and the expected pairs."""
    rng = random.Random(seed)
    human = {}
    for g in groups():
        if rng.random() < tie_rate:
            pattern = rng.choice([(2, 1, 1), (2, 2, 0), (1, 0, 0), (2, 2, 1)])
            human[g] = tuple(rng.sample(pattern, 3))
        else:
            human[g] = tuple(rng.sample((0, 1, 2), 3))
    sim: dict[str, dict] = {}
    for simulator, frac in agreement.items():
        usable = [g for g in groups() if g[3] in metrics_of[simulator]]
        slots = [g for g in usable for _ in _agreements(human[g], (0, 1, 2))]
        rng.shuffle(slots)
        want = {g: 0 for g in usable}
        for g in slots[: round(frac * len(slots))]:
            want[g] += 1
        sim[simulator] = {}
        for g in usable:
            options = [p for p in permutations((0, 1, 2)) if sum(ok for *_, ok in _agreements(human[g], p)) == want[g]]
            sim[simulator][g] = rng.choice(options)
    return {"human": human, "sim": sim, "metrics_of": metrics_of}


def expected_table(plan: dict) -> dict[str, list[dict]]:
    out = {}
    for simulator, sg in plan["sim"].items():
        rows = []
        for g, hg in plan["human"].items():
            high = _agreements(hg, (0, 1, 2))
            if g in sg:
                rows += [dict(zip(("arm", "task", "level", "metric"), g), a=a, b=b, evaluable=True, agree=ok) for a, b, ok in _agreements(hg, sg[g])]
            else:
                rows += [dict(zip(("arm", "task", "level", "metric"), g), a=a, b=b, evaluable=False, agree=False) for a, b, _ in high]
        table = []
        keys = [("overall", None)] + [(c, c) for c in ("arm", "task", "level", "metric")]
        for grouping, col in keys:
            values = ["all"] if col is None else list(dict.fromkeys(r[col] for r in rows))
            for v in values:
                sub = [r for r in rows if col is None or r[col] == v]
                ev = [r for r in sub if r["evaluable"]]
                table.append(dict(grouping=grouping, group=v, k=sum(r["agree"] for r in ev), n=len(ev), n_not_evaluable=len(sub) - len(ev)))
        for arm in ARMS:
            for task in TASKS:
                sub = [r for r in rows if r["arm"] == arm and r["task"] == task]
                ev = [r for r in sub if r["evaluable"]]
                table.append(dict(grouping="arm x task", group=f"{arm}/{task}", k=sum(r["agree"] for r in ev), n=len(ev), n_not_evaluable=len(sub) - len(ev)))
        out[simulator] = table
    return out


# ---------------------------------------------------------------- human side (release format)


def _pid(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(24))


def _human_value(metric: str, g: int, i: int, kg_bands: dict = KG_POST_BANDS) -> float:
    band = kg_bands[g] if metric == "KG" else LIKERT_BANDS[2 - g if metric == "CO" else g]
    return band[i % len(band)]


def write_human(out: Path, plan: dict, participants: int, seed: int, fmt: str = "card") -> None:
    if fmt == "card":
        return write_human_card(out, plan, participants, seed)
    if fmt != "legacy":
        raise ValueError(f"unknown format {fmt!r} (expected card or legacy)")
    rng = random.Random(seed + 1)
    out.mkdir(parents=True, exist_ok=True)
    for arm in ARMS:
        for task in TASKS:
            stem = f"knowchat_{arm}_{task}"
            item_list = items(task)
            sheets = {
                "background": [["prolific id", "age", "education"]],
                "prescreening": [["prolific id", "score", "max score"]],
                "pretest": [["prolific id", "session", "score", "max score"]],
                "posttest": [["prolific id", "session", "score", "max score"]],
                "main": [["prolific id", "session", "condition", "topic"]],
                "survey": [["prolific id", "session", "delivery calibration", "cognitive overload", "interaction quality"]],
                "questions": [["question id", "item id", "question"]],
            }
            for k, (item_id, concepts) in enumerate(item_list):
                sheets["questions"].append([f"{task}-q{k + 1}", item_id, f"Synthetic question about {concepts[0]}"])
            lines = []
            for level in LEVELS:
                for i in range(participants):
                    pid = _pid(rng)
                    sheets["background"].append([pid, 20 + rng.randrange(40), rng.choice(["BSc", "MSc", "High school"])])
                    sheets["prescreening"].append([pid, PRESCREEN[level], 10])
                    for s in range(3):
                        code = (i + s) % 3
                        session = s + 1
                        k = (i + 2 * s) % len(item_list)
                        item_id, concepts = item_list[k]
                        vals = {m: _human_value(m, plan["human"][(arm, task, level, m)][code], i) for m in METRICS if task in METRIC_TASKS[m]}
                        sheets["main"].append([pid, session, code, task])
                        sheets["survey"].append([pid, session, vals["DC"], vals["CO"], vals["IQ"]])
                        if task == "math":
                            sheets["pretest"].append([pid, session, PRE_SCORE, MAX_SCORE])
                            sheets["posttest"].append([pid, session, vals["KG"], MAX_SCORE])
                        messages = [
                            {"role": "user", "content": FILLER_USER},
                            {"role": "assistant", "content": f"First: {concepts[0]}. Then: {concepts[1]}."},
                            {"role": "user", "content": "Okay, what next?"},
                            {"role": "assistant", "content": f"Finally: {concepts[2]}."},
                        ]
                        lines.append({"prolific id": pid, "topic": task, "condition": code, "session": session, "questions": [f"{task}-q{k + 1}"], "messages": messages})
            rng.shuffle(lines)
            with (out / f"{stem}.jsonl").open("w", encoding="utf-8") as fh:
                for rec in lines:
                    fh.write(json.dumps(rec) + "\n")
            _save(out / f"{stem}.xlsx", sheets)


def _items_row(correct: int, n: int, rng: random.Random) -> list[int]:
    """n item scores (0/1) with ``correct`` ones, in random places."""
    right = set(rng.sample(range(n), correct))
    return [int(k in right) for k in range(n)]


def _save(path: Path, sheets: dict[str, list[list]]) -> None:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    wb.save(path)


def write_human_card(out: Path, plan: dict, participants: int, seed: int) -> None:
    """The dataset card's layout (see the module docstring)."""
    rng = random.Random(seed + 1)
    out.mkdir(parents=True, exist_ok=True)
    pre_items = [f"Q{k + 1}" for k in range(CARD_PRESCREEN_ITEMS)]
    test_items = [f"Q{k + 1}" for k in range(CARD_TEST_ITEMS)]
    for arm in ARMS:
        for task in TASKS:
            item_list = items(task)
            sheets: dict[str, list[list]] = {
                "summary": [["arm", "task", "participants", "conversations"]],
                "background": [["prolific id", "topic", "self-reported ability", "courses taken"]],
                "prescreening": [["prolific id", *pre_items]],
            }
            if task == "math":
                sheets["pretest"] = [["prolific id", "session", *test_items]]
                sheets["posttest"] = [["prolific id", "session", *test_items]]
            main_header = ["timestamp", "time", "prolific id", "topic", "condition", "session", "answer", "messages"]
            sheets["main"] = [main_header + (["questions"] if task == "expertqa" else [])]
            sheets["survey"] = [["prolific id", "session", "Delivery Calibration", "Cognitive Overload", "Interaction Quality"]]
            if task == "expertqa":
                sheets["questions"] = [["question", "domain", "item id"]]
                for item_id, concepts in item_list:
                    sheets["questions"].append([f"Synthetic question about {concepts[0]}", "synthetic", item_id])
            lines = []
            n_people = 0
            for level in LEVELS:
                for i in range(participants):
                    pid = _pid(rng)
                    n_people += 1
                    sheets["background"].append([pid, task, rng.randint(1, 5), rng.choice(["none", "one course", "several courses"])])
                    sheets["prescreening"].append([pid, *_items_row(PRESCREEN[level], CARD_PRESCREEN_ITEMS, rng)])
                    for s in range(3):
                        code = (i + s) % 3
                        k = (i + 2 * s) % len(item_list)
                        item_id, concepts = item_list[k]
                        vals = {
                            m: _human_value(m, plan["human"][(arm, task, level, m)][code], i, CARD_KG_POST_BANDS)
                            for m in METRICS if task in METRIC_TASKS[m]
                        }
                        messages = [
                            {"role": "user", "content": FILLER_USER},
                            {"role": "assistant", "content": f"First: {concepts[0]}. Then: {concepts[1]}."},
                            {"role": "user", "content": "Okay, what next?"},
                            {"role": "assistant", "content": f"Finally: {concepts[2]}."},
                        ]
                        stamp = f"2026-02-{1 + (i + s) % 28:02d} {10 + s}:00:00"
                        rec = {"timestamp": stamp, "time": 300 + 60 * s, "prolific id": pid, "topic": task,
                               "condition": code, "session": s, "answer": "my final answer", "messages": messages}
                        if task == "expertqa":
                            rec["questions"] = k  # an integer index into the questions sheet
                        lines.append(rec)
                        row = [stamp, rec["time"], pid, task, code, s, rec["answer"], json.dumps(messages)[:32000]]
                        sheets["main"].append(row + ([k] if task == "expertqa" else []))
                        sheets["survey"].append([pid, s, vals["DC"], vals["CO"], vals["IQ"]])
                        if task == "math":
                            sheets["pretest"].append([pid, s, *_items_row(CARD_PRE_SCORE, CARD_TEST_ITEMS, rng)])
                            sheets["posttest"].append([pid, s, *_items_row(int(vals["KG"]), CARD_TEST_ITEMS, rng)])
            sheets["summary"].append([arm, task, n_people, len(lines)])
            rng.shuffle(lines)
            with (out / f"{task}_{arm}_conversations.jsonl").open("w", encoding="utf-8") as fh:
                for rec in lines:
                    fh.write(json.dumps(rec) + "\n")
            _save(out / f"{task}_{arm}.xlsx", sheets)


# ---------------------------------------------------------------- simulated run (results contract)


def _arrow_type(annotation) -> pa.DataType:
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, UnionType):
        return _arrow_type(args[0])
    if get_origin(annotation) is list:
        return pa.list_(_arrow_type(args[0]))
    return {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}[annotation]


def arrow_schema(model) -> pa.Schema:
    return pa.schema([(name, _arrow_type(f.annotation)) for name, f in model.model_fields.items()])


def defaults(model) -> dict:
    """The contract's default values, so written rows hold what the engine would write."""
    return {n: f.default for n, f in model.model_fields.items() if not f.is_required()}


def _sim_value(metric: str, g: int) -> float:
    return {"KG": 0.1 + 0.3 * g, "DC": 0.2 + 0.3 * g, "CO": 0.2 + 0.3 * (2 - g), "IQ": 3.0 + 3.0 * g}[metric]


def sim_conditions(arm: str) -> list[tuple[str, str]]:
    """(assistant_model, assistant_strategy) per condition code."""
    if arm == "strategy":
        return [(STRATEGY_ARM_MODEL, s) for s in SIM_STRATEGIES]
    return [(m, MODEL_ARM_STRATEGY) for m in SIM_MODELS]


def write_sim(run_dir: Path, plan: dict, trials: int, turns: int = 2, rows_per_file: int = 2000) -> int:
    """sessions/ and turns/ Parquet folders; one 'failed' decoy per cell; returns the session count."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "sessions").mkdir(exist_ok=True)
    (run_dir / "turns").mkdir(exist_ok=True)
    s_schema, t_schema = arrow_schema(SessionRow), arrow_schema(TurnRow)
    s_defaults, t_defaults = defaults(SessionRow), defaults(TurnRow)
    s_buf: list[dict] = []
    t_buf: list[dict] = []
    n_files = [0, 0]
    total = 0

    def flush(force: bool = False) -> None:
        for k, (buf, schema, name) in enumerate(((s_buf, s_schema, "sessions"), (t_buf, t_schema, "turns"))):
            if buf and (force or len(buf) >= rows_per_file):
                pq.write_table(pa.Table.from_pylist(buf, schema=schema), run_dir / name / f"part-{n_files[k]:05d}.parquet")
                n_files[k] += 1
                buf.clear()

    for simulator, sg in plan["sim"].items():
        metrics = plan["metrics_of"][simulator]
        for arm in ARMS:
            for code, (model, strategy) in enumerate(sim_conditions(arm)):
                condition = f"{model}:{strategy}"
                for task in TASKS:
                    for level in LEVELS:
                        vals = {m: _sim_value(m, sg[(arm, task, level, m)][code]) for m in METRICS if (arm, task, level, m) in sg}
                        for item_id, concepts in items(task):
                            gj = graph_json(concepts)
                            for trial in range(trials + 1):
                                failed = trial == trials
                                jitter = 0.0 if failed or trial >= trials - trials % 2 else (0.01 if trial % 2 == 0 else -0.01)
                                sid = f"{task}/{item_id}/{level}/{condition}/{simulator}-{trial}"
                                row = dict(
                                    s_defaults,
                                    run_id="synthetic", config_hash="0" * 16, session_id=sid, task=task, item_id=item_id,
                                    knowledge_level=level, condition=condition, assistant_model=model, assistant_strategy=strategy,
                                    simulator=simulator, trial=trial, seed=trial, rules_preset="paper", graph_size=len(concepts),
                                    tau=2, iu_labels=[f"IU{i + 1}: {c}" for i, c in enumerate(concepts)],
                                    initial_states=[0] * len(concepts), graph_json=gj,
                                    status="failed" if failed else "ok", turns=turns, stop_reason="max_turns",
                                    error="synthetic decoy" if failed else None,
                                )
                                for m in METRICS:
                                    col = m.lower()
                                    if failed:
                                        row[col] = 1000.0 * (code + 1)  # would flip signs if read
                                    elif m in metrics:
                                        row[col] = vals.get(m, 0.5) + jitter
                                s_buf.append(row)
                                total += 1
                                for t in range(turns):
                                    text = f"Consider {concepts[1]} together with {concepts[2]}." if t == 0 else f"Also recall {concepts[3]}."
                                    t_buf.append(dict(
                                        t_defaults,
                                        run_id="synthetic", session_id=sid, turn=t + 1, user_message=FILLER_SIM_USER,
                                        assistant_message=text, signals_json="[]", states=[0] * len(concepts),
                                        carries=[0.0] * len(concepts), comprehension_load=0.0, attempt_load=0.0,
                                        effective_load=0.0, overload=False, eta=1.0, n_upward_transitions=0,
                                        absorbed_gain=0.0, ic_numerator=0, ic_denominator=0, zpd_size=0,
                                        absorbed_ic_numerator=0, new_ius=0, disallowed=0, familiarity=0.0,
                                        novelty=0.0, engagement=0.0, density=0.0,
                                    ))
                                flush()
    flush(force=True)
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="human dataset folder to write")
    ap.add_argument("--sim-out", type=Path, default=None, help="also write a matching run folder here")
    ap.add_argument("--agreement", type=float, default=0.75, help="planted share of agreeing high-signal pairs (structured simulator)")
    ap.add_argument("--baseline-agreement", type=float, default=None, help="also plant a 'zero-shot-cot' simulator (IQ only, like baselines) with this share")
    ap.add_argument("--participants", type=int, default=3, help="participants per (arm, task, level); each does 3 sessions")
    ap.add_argument("--tie-rate", type=float, default=0.25, help="share of groups with two tied conditions (low-signal pairs)")
    ap.add_argument("--trials", type=int, default=2, help="simulated sessions per (condition, item, level)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=("card", "legacy"), default="card",
                    help="human data layout: the dataset card's (default) or the older one")
    args = ap.parse_args(argv)
    for frac in (args.agreement, args.baseline_agreement):
        if frac is not None and not 0 <= frac <= 1:
            ap.error("agreement shares must lie in [0, 1]")
    agreement = {"structured": args.agreement}
    metrics_of = {"structured": METRICS}
    if args.baseline_agreement is not None:
        agreement["zero-shot-cot"] = args.baseline_agreement
        metrics_of["zero-shot-cot"] = ("IQ",)
    plan = make_plan(args.seed, agreement, args.tie_rate, metrics_of)
    write_human(args.out, plan, args.participants, args.seed, args.format)
    expected = expected_table(plan)
    planted = {
        "agreement": expected,
        "coverage_jaccard": 0.5,
        "codes": CONDITION_CODES,
        "human_goodness": {"|".join(g): list(v) for g, v in plan["human"].items()},
        "format": args.format,
    }
    (args.out / "planted.json").write_text(json.dumps(planted, indent=1))
    if args.sim_out:
        n = write_sim(args.sim_out, plan, args.trials)
        print(f"wrote {n} simulated sessions to {args.sim_out}")
    overall = {s: next(r for r in t if r["grouping"] == "overall") for s, t in expected.items()}
    print(f"wrote {args.out}; planted overall agreement: " + ", ".join(f"{s} {r['k']}/{r['n']}" for s, r in overall.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
