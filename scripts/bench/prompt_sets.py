"""Two prompt sets side by side on one model: the learners' openings, and per role how answers
parse, get repaired, get truncated, and reach a length bound (issue 22, points 2, 3 and 6).

(a) **openings**: the structured learner's first message and a baseline's (``--baseline``), for every
    item of ``--items`` (default: the 30 reference math items, ``shared/knowsim-ref``) at
    ``--level``, each prompt set in turn. Per item: the problem's length, whether the rendered prompt
    carries the whole problem, the message schema's bound (v2: 300 characters; v3: none), the
    opening's length, the share of the problem's numbers and content words it restates, and
    whether it hit a bound (a string as long as its ``maxLength``: a constrained decoder cut it).
(b) **sessions**: ``--sessions`` short conversations (structured learner with two strategies, and
    the baseline) of ``--turns`` turns through ``run_shard`` (the real loop: ask/repair/truncation
    retry of ``sim/ask.py``), then one Interaction Quality rating per session.

Every model call is recorded; per role and prompt set it prints requests, answers parsed at the
first call, accepted after the whole-budget retry of a truncated first answer, repaired (first
answer refused, the repair round accepted), failed, calls cut by
``max_tokens`` (``finish_reason == "length"``), and per free-text field how many accepted answers
reached the field's schema bound (``hit``) or are longer than v2's bound (``>v2``: what v2's
schema would have cut on a constrained decoder).

    python scripts/bench/prompt_sets.py                       # offline test double (no server)
    PYTHONPATH=$PWD .venv-llm/bin/python scripts/bench/prompt_sets.py \\
        --base-url http://127.0.0.1:PORT/v1 --model smollm2   # a real model (OpenAI-compatible)

The last line is one JSON object with every figure; its ``first_call_ok_<last>_vs_<first>_ratio``
(default ``first_call_ok_v3_vs_v2_ratio``) is the last prompt set's share of requests (all roles)
whose answer was accepted at the first call, over the first set's (null with one set, or a share of 0).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ray_knowsim.io.loaders import load_graph_cache, load_init_cache, load_items  # noqa: E402
from ray_knowsim.llm.parse import extract_json, parse_rating, parse_signal_report, parse_user_turn  # noqa: E402
from ray_knowsim.llm.recording import Call, RecordingModel  # noqa: E402
from ray_knowsim.schema.chat import ChatRequest  # noqa: E402
from ray_knowsim.schema.roles import ROLE_DEFAULTS  # noqa: E402
from ray_knowsim.schema.outputs import V2_REASONING_MAX_CHARS, V2_TEXT_BOUNDS  # noqa: E402
from ray_knowsim.simulators import render_baseline_user  # noqa: E402
from ray_knowsim.prompts.judges import render_rater  # noqa: E402
from ray_knowsim.prompts.render import render_user_first  # noqa: E402
from ray_knowsim.rules.config import reference_rules  # noqa: E402
from ray_knowsim.sim.ask import ask_all  # noqa: E402
from ray_knowsim.sim.shard import run_shard  # noqa: E402
from ray_knowsim.sim.types import RoleModels, RoleSettings, SessionSpec, ShardContext, ShardSpec, item_key  # noqa: E402
from ray_knowsim.simulators.profiles import level_profile  # noqa: E402

#: v2's character bound per free-text field (v3 has none): what ">v2" compares with
V2_BOUND = {**V2_TEXT_BOUNDS, "teaching_quality_reasoning": V2_REASONING_MAX_CHARS, "user_attempt_reasoning": V2_REASONING_MAX_CHARS}
RATIONALES = ("ic_reasoning", "po_reasoning", "quality_reasoning", "pl_reasoning")
INIT_TASK_KEY = {"math": "competition_math", "expertqa": "expertqa"}


# ---- data ---------------------------------------------------------------------------------------


def shared_root() -> Path:
    env = os.environ.get("RAY_KNOWSIM_SHARED")
    return Path(env) if env else ROOT.parent / "shared"


def reference_data(task: str = "math"):
    ref = shared_root() / "knowsim-ref"
    name = "math" if task == "math" else "expertqa"
    items = load_items(ref / "paper_subset" / f"{name}.jsonl", task)
    graphs = load_graph_cache(ref / "iu_cache" / f"{name}.json", mode="reference")  # the reference data has cycles
    init = load_init_cache(ref / "init_ks_cache.json")
    return [i for i in items if i.id in graphs], graphs, init


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z]{4,}")


def restated(problem: str, message: str) -> tuple[float, float]:
    """Shares of the problem's distinct numbers and of its content words (4+ letters) found in the
    message: how much of the problem an opening puts to the tutor."""
    low = message.lower()
    nums, words = set(_NUMBER.findall(problem)), set(_WORD.findall(problem.lower()))
    got_n, got_w = set(_NUMBER.findall(low)), set(_WORD.findall(low))
    return (len(nums & got_n) / len(nums) if nums else 1.0), (len(words & got_w) / len(words) if words else 1.0)


# ---- reading answers ------------------------------------------------------------------------------


def _fields(request: ChatRequest, text: str) -> list[tuple[str, str, int | None]]:
    """``(field, value, schema bound)`` of every free-text field of an answer."""
    ext = extract_json(text, allow_array=True)
    if ext.error is not None or not isinstance(ext.value, (dict, list)):
        return []
    props = (request.json_schema or {}).get("properties", {})
    out = []
    if request.role == "extractor":
        value = ext.value.get("iu_analysis") if isinstance(ext.value, dict) else ext.value
        slots = props.get("iu_analysis", {}).get("prefixItems", [])
        for k, entry in enumerate(value if isinstance(value, list) else []):
            slot = slots[k]["properties"] if k < len(slots) else {}
            for name in ("teaching_quality_reasoning", "user_attempt_reasoning"):
                if isinstance(entry, dict) and isinstance(entry.get(name), str):
                    out.append((name, entry[name], slot.get(name, {}).get("maxLength")))
        return out
    if isinstance(ext.value, dict):
        for name in ("thought", "message", *RATIONALES):
            if isinstance(ext.value.get(name), str):
                out.append((name, ext.value[name], props.get(name, {}).get("maxLength")))
    return out


def _parser(graphs: dict):
    def parse(request: ChatRequest, text: str):
        if request.role == "user_sim":
            return parse_user_turn(text)
        if request.role == "extractor":
            return parse_signal_report(text, graphs[request.offline_facts["item_id"]])
        if request.role == "judge":
            return parse_rating(text)
        return None  # the assistant writes plain text

    return parse


def role_stats(calls: list[Call], graphs: dict) -> dict[str, dict[str, Any]]:
    """Per role: requests, parsed at first call, repaired, failed, truncated calls, field bounds."""
    parse = _parser(graphs)
    by_request: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for c in calls:
        by_request[(c.request.role, c.request.request_id)].append(c)
    stats: dict[str, dict[str, Any]] = {}
    for (role, _), group in by_request.items():
        s = stats.setdefault(role, {"requests": 0, "calls": 0, "first_ok": 0, "after_truncation": 0, "repaired": 0,
                                    "failed": 0, "truncated_calls": 0, "fields": {}})  # fmt: skip
        s["requests"] += 1
        s["calls"] += len(group)
        s["truncated_calls"] += sum(c.response.finish_reason == "length" for c in group)
        results = [parse(c.request, c.response.text) if c.response.error is None else None for c in group]
        if role == "assistant":
            ok = [c.response.error is None and bool(c.response.text.strip()) for c in group]
        else:
            ok = [r is not None and r.ok for r in results]
        cut = [c.response.finish_reason == "length" for c in group]
        s["first_ok"] += ok[0] and not cut[0]
        if ok[-1] and not (ok[0] and not cut[0]):  # accepted after a retry: the whole budget, or a repair round
            s["after_truncation" if cut[0] else "repaired"] += 1
        s["failed"] += not ok[-1]
        accepted = next((c for c, good in zip(reversed(group), reversed(ok)) if good), None)
        if accepted is None or role == "assistant":
            continue
        for name, value, bound in _fields(accepted.request, accepted.response.text):
            f = s["fields"].setdefault(name, {"n": 0, "hit": 0, "over_v2": 0, "max_chars": 0, "bound": bound})
            f["n"] += 1
            f["hit"] += bound is not None and len(value) >= bound
            f["over_v2"] += name in V2_BOUND and len(value) > V2_BOUND[name]
            f["max_chars"] = max(f["max_chars"], len(value))
    return stats


# ---- (a) openings ---------------------------------------------------------------------------------


async def openings(model, items, graphs, init, prompts: str, level: str, baseline: str, attempts: int, limit: int | None):
    rows, requests, meta = [], [], []
    for item in items[: limit or None]:
        graph = graphs[item.id]
        ks = init.lookup(INIT_TASK_KEY[item.task], item.id, level) or {}
        rid = f"open/{prompts}/{item.id}"
        seed = int(hashlib.sha256(f"{item.id}/{level}".encode()).hexdigest()[:8], 16)  # the same for both sets
        requests.append(render_user_first(item, graph, ks, prompts=prompts, seed=seed, request_id=rid + "/structured"))
        meta.append((item, "structured"))
        if baseline:
            requests.append(render_baseline_user(item, baseline, [], prompts=prompts, profile=level_profile(level, 7), graph=graph,
                                                 initial_states=ks, knowledge_level=level, seed=seed,
                                                 request_id=rid + "/" + baseline))  # fmt: skip
            meta.append((item, baseline))
    answers = await ask_all(model, requests, lambda text, i: parse_user_turn(text), attempts=attempts)
    for (item, who), req, ans in zip(meta, requests, answers):
        message = ans.value.message if ans.ok else ""
        bound = (req.json_schema or {}).get("properties", {}).get("message", {}).get("maxLength")
        nums, words = restated(item.question, message)
        rows.append({
            "item": item.id, "simulator": who, "problem_chars": len(item.question),
            "prompt_has_problem": item.question in req.messages[-1]["content"],
            "message_bound": bound, "problem_fits_bound": bound is None or len(item.question) <= bound,
            "opening_chars": len(message), "hit_bound": bound is not None and len(message) >= bound,
            "numbers_restated": round(nums, 2), "words_restated": round(words, 2), "error": ans.error,
        })  # fmt: skip
    return rows


def opening_summary(rows: list[dict]) -> dict[str, Any]:
    out = {}
    for who in sorted({r["simulator"] for r in rows}):
        rs = [r for r in rows if r["simulator"] == who]
        lengths = [r["opening_chars"] for r in rs if r["error"] is None]
        out[who] = {
            "n": len(rs), "failed": sum(r["error"] is not None for r in rs),
            "prompt_has_problem": sum(r["prompt_has_problem"] for r in rs),
            "problem_longer_than_bound": sum(not r["problem_fits_bound"] for r in rs),
            "hit_bound": sum(r["hit_bound"] for r in rs),
            "chars_min_median_max": [min(lengths, default=0), int(statistics.median(lengths)) if lengths else 0, max(lengths, default=0)],
            "numbers_restated_mean": round(statistics.mean(r["numbers_restated"] for r in rs), 2) if rs else None,
            "words_restated_mean": round(statistics.mean(r["words_restated"] for r in rs), 2) if rs else None,
        }  # fmt: skip
    return out


# ---- (b) sessions ---------------------------------------------------------------------------------


def session_specs(items, level: str, baseline: str, n: int) -> list[SessionSpec]:
    plan = [("simple", "structured"), ("socratic", "structured"), ("simple", baseline)]
    specs = []
    for k in range(n):
        item = items[k // len(plan) % len(items)]
        strategy, simulator = plan[k % len(plan)]
        sid = f"{item.task}/{item.id}/{level}/m:{strategy if simulator == 'structured' else simulator}/0"
        specs.append(SessionSpec(session_id=sid, task=item.task, item_id=item.id, knowledge_level=level,
                                 condition=sid.split("/")[3], assistant_model="m", assistant_strategy=strategy,
                                 simulator=simulator, trial=0, seed=1000 + k, init_seed=7))  # fmt: skip
    return specs


async def sessions(model, items, graphs, init, prompts: str, args) -> list:
    chosen = sorted(items, key=lambda i: len(graphs[i.id].nodes))[: max(1, args.sessions // 3 + (args.sessions % 3 > 0))]
    specs = []
    for spec in session_specs(chosen, args.level, args.baseline, args.sessions):
        ks = init.lookup(INIT_TASK_KEY[spec.task], spec.item_id, spec.knowledge_level)
        specs.append(replace(spec, initial_ks=ks))
    shard = ShardSpec("shard-prompts", 0, tuple(specs), {item_key(i.task, i.id): i for i in chosen},
                      {item_key(i.task, i.id): graphs[i.id] for i in chosen})
    caps = {"user_sim": args.user_sim_max_tokens, "assistant": args.assistant_max_tokens, "extractor": args.extractor_max_tokens}
    roles = {role: RoleSettings(model="m", temperature=ROLE_DEFAULTS[role].temperature, max_tokens=cap or ROLE_DEFAULTS[role].max_tokens,
                                attempts=ROLE_DEFAULTS[role].attempts, repair_temperature=ROLE_DEFAULTS[role].repair_temperature)
             for role, cap in caps.items()}  # the product's role defaults, caps overridable
    ctx = ShardContext(run_id="prompt-sets", config_hash=prompts, rules=reference_rules(), max_turns=args.turns,
                       early_stop="virtual", roles=roles, prompts=prompts)  # fmt: skip
    results = [r async for r in run_shard(shard, RoleModels(user_sim=model, extractor=model, assistants={"m": model}), ctx)]
    items_by_id = {i.id: i for i in chosen}
    ratings = [render_rater(items_by_id[r.session.item_id], _pairs(r), knowledge_level=r.session.knowledge_level, prompts=prompts,
                            request_id=f"rate/{r.session.session_id}")
               for r in results if _pairs(r)]  # fmt: skip
    await ask_all(model, ratings, lambda text, i: parse_rating(text), attempts=2)
    return results


def _pairs(result) -> list[list[str]]:
    pairs = []
    for row in result.turns:
        pairs += [["user", row.user_message], ["assistant", row.assistant_message]]
    return pairs


# ---- main -----------------------------------------------------------------------------------------


def build_model(args):
    if not args.base_url:
        from ray_knowsim.llm.offline import OfflineModel

        return OfflineModel()
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig

    return OpenAICompatibleModel(HTTPModelConfig(base_url=args.base_url, model=args.model, timeout_s=args.timeout_s,
                                                 max_attempts=2, max_in_flight=args.concurrency))  # fmt: skip


def print_roles(prompts: str, stats: dict) -> None:
    for role, s in sorted(stats.items()):
        n = s["requests"]
        print(f"  {prompts} {role:9s} requests {n:3d}  calls {s['calls']:3d}  first-call ok {s['first_ok'] / n:.2f}  "
              f"ok after the whole-budget retry {s['after_truncation'] / n:.2f}  repaired {s['repaired'] / n:.2f}  "
              f"failed {s['failed'] / n:.2f}  truncated calls {s['truncated_calls'] / max(1, s['calls']):.2f}")
        for name, f in sorted(s["fields"].items()):
            print(f"      {name:28s} n {f['n']:4d}  bound {f['bound']}  hit {f['hit'] / f['n']:.2f}  >v2 {f['over_v2'] / f['n']:.2f}  "
                  f"max {f['max_chars']} chars")


def first_call_ok_share(stats: dict[str, dict[str, Any]]) -> float | None:
    """Over every role's requests: the share accepted at the first call (neither cut nor refused)."""
    n = sum(s["requests"] for s in stats.values())
    return sum(s["first_ok"] for s in stats.values()) / n if n else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="v2,v3")
    ap.add_argument("--base-url", default="", help="an OpenAI-compatible server; empty: the offline test double")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--level", default="novice")
    ap.add_argument("--baseline", default="zero-shot-cot")
    ap.add_argument("--openings", type=int, default=0, help="items for (a); 0 = all, -1 = skip (a)")
    ap.add_argument("--baseline-openings", action="store_true", help="also ask the baseline's opening for every item")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--user-sim-max-tokens", type=int, default=None, help="cap; default: the role's (schema/roles.py)")
    ap.add_argument("--assistant-max-tokens", type=int, default=None)
    ap.add_argument("--extractor-max-tokens", type=int, default=None)
    ap.add_argument("--timeout-s", type=float, default=900)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None, help="write every opening row and call summary here (JSON)")
    args = ap.parse_args()
    items, graphs, init = reference_data()
    inner = build_model(args)
    figures: dict[str, Any] = {"model": args.model if args.base_url else "offline", "load_avg_start": os.getloadavg()[0]}
    dump: dict[str, Any] = {}
    for prompts in args.sets.split(","):
        rec = RecordingModel(inner)
        t = time.perf_counter()
        rows = [] if args.openings < 0 else asyncio.run(openings(
            rec, items, graphs, init, prompts, args.level, args.baseline if args.baseline_openings else "", attempts=3,
            limit=args.openings))  # fmt: skip
        opening_calls = list(rec.calls)
        results = asyncio.run(sessions(rec, items, graphs, init, prompts, args)) if args.sessions else []
        wall = time.perf_counter() - t
        summary = opening_summary(rows)
        print(f"== prompt set {prompts} ({wall:.0f} s)")
        for who, o in summary.items():
            print(f"  openings {who}: {o}")
        stats = role_stats(rec.calls, graphs)
        print_roles(prompts, stats)
        sess = [{"id": r.session.session_id, "status": r.session.status, "error": r.session.error, "turns": r.session.turns,
                 "truncations": r.session.llm_truncations, "extractor_repairs": r.session.extractor_repairs,
                 "extractor_refusals": r.session.extractor_refusals} for r in results]  # fmt: skip
        for s in sess:
            print(f"  session {s}")
        figures[prompts] = {"openings": summary, "roles": stats, "sessions": sess, "wall_s": round(wall, 1),
                            "opening_calls": len(opening_calls)}  # fmt: skip
        dump[prompts] = {"openings": rows, "calls": [
            {"role": c.request.role, "request_id": c.request.request_id, "max_tokens": c.request.max_tokens,
             "finish": c.response.finish_reason, "completion_tokens": c.response.usage.completion_tokens,
             "error": c.response.error, "text": c.response.text} for c in rec.calls]}  # fmt: skip
    sets = args.sets.split(",")
    first, last = (first_call_ok_share(figures[p]["roles"]) for p in (sets[0], sets[-1]))
    figures[f"first_call_ok_{sets[-1]}_vs_{sets[0]}_ratio"] = (
        round(last / first, 3) if len(sets) > 1 and first and last is not None else None)
    print(f"first-call ok share, all roles: {sets[0]} {first}, {sets[-1]} {last}")
    if args.out:
        args.out.write_text(json.dumps({"figures": figures, **dump}, indent=1))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
