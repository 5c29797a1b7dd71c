"""Benchmark: prompt and completion tokens per 15-turn conversation, per role, through the HTTP path.

The offline model is served over HTTP (``serve_model_in_thread``) and every role talks to it
through the OpenAI-compatible client with ``offline_server: true`` (the facts travel as the body
extension, never in the prompt text), so the requests measured are exactly what a real endpoint
would receive. Sessions: the demo items x ``--levels`` x ``--strategies``, structured learner,
``--turns`` turns (default 15, no early stop). The judges run after the loop (``score/``), so
their tokens are not measured here.

Counting. With the ``llm-cpu`` environment's SmolLM2 tokenizer (``--tokenizer``, default
``~/.cache/ray_knowsim/smollm2-135m-instruct``; needs ``transformers``) tokens are the tokenizer's
count of each message's content, summed over the messages of a request (no chat-template
overhead). Without it, a stated character proxy: ceil(characters / 4) per message.

Figures (per conversation = per session, means over sessions):

* ``per_role``: prompt and completion tokens per conversation for each role;
* ``prompt_tokens_vs_context_block_ratio``: all prompt tokens over the same prompts with the old
  machine-readable context block appended (reconstructed from each request's facts exactly as the
  old ``prompts/context.py`` wrote it: the marker line plus a fenced compact JSON of the facts);
  expected well under 0.75;
* ``stable_prefix_share``: per role, the share of each prompt (characters) that equals the start of
  the same session's previous prompt of that role, i.e. what a prefix cache can reuse across
  turns; averaged over all requests but each session's first of that role.

The last line is one JSON object. Run: ``python scripts/bench/tokens.py`` (``--quick``: 2 items,
1 level, 1 strategy, 4 turns). In the llm-cpu env: ``PYTHONPATH=. /work/main/.venv-llm/bin/python
scripts/bench/tokens.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ray_knowsim.demo import demo_graphs, demo_items  # noqa: E402
from ray_knowsim.llm.http.client import OpenAICompatibleModel  # noqa: E402
from ray_knowsim.llm.http.config import HTTPModelConfig  # noqa: E402
from ray_knowsim.llm.offline import OfflineModel  # noqa: E402
from ray_knowsim.llm.recording import RecordingModel  # noqa: E402
from ray_knowsim.llm.offline.server import serve_model_in_thread  # noqa: E402
from ray_knowsim.schema.chat import ChatRequest, ChatResponse  # noqa: E402
from ray_knowsim.schema.roles import ROLE_DEFAULTS  # noqa: E402
from ray_knowsim.prompts.templates import DEFAULT_PROMPTS  # noqa: E402
from ray_knowsim.rules.config import reference_rules  # noqa: E402
from ray_knowsim.sim.shard import run_shard  # noqa: E402
from ray_knowsim.sim.types import RoleModels, RoleSettings, SessionSpec, ShardContext, ShardSpec, item_key  # noqa: E402

#: the old in-prompt block (removed from prompts; reconstructed here for the comparison)
OLD_CONTEXT_MARKER = "### context (json)"
ROLES = ("user_sim", "assistant", "extractor")  # the judges are not part of the loop (see score/)
DEFAULT_TOKENIZER = Path.home() / ".cache" / "ray_knowsim" / "smollm2-135m-instruct"


def old_context_block(facts: dict[str, Any]) -> str:
    body = json.dumps(facts, ensure_ascii=False, separators=(",", ":"))
    return f"{OLD_CONTEXT_MARKER}\n```json\n{body}\n```"


class Counter:
    def __init__(self, tokenizer_dir: Path | None):
        self.method = "chars/4 proxy (ceil(characters / 4) per message)"
        self._tok = None
        if tokenizer_dir is not None and tokenizer_dir.is_dir():
            try:
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
                self.method = f"SmolLM2 tokenizer ({tokenizer_dir.name}), message contents summed"
            except Exception as exc:  # noqa: BLE001 - any failure falls back to the stated proxy
                print(f"tokenizer unavailable ({type(exc).__name__}: {exc}); using the character proxy", file=sys.stderr)

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        if self._tok is None:
            return math.ceil(len(text) / 4)
        return len(self._tok(text, add_special_tokens=False)["input_ids"])


def sessions(items, levels, strategies) -> list[SessionSpec]:
    specs = []
    for item in items:
        for level in levels:
            for strategy in strategies:
                sid = f"{item.task}/{item.id}/{level}/off:{strategy}/0"
                seed = int(hashlib.sha256(sid.encode()).hexdigest()[:8], 16)
                specs.append(SessionSpec(
                    session_id=sid, task=item.task, item_id=item.id, knowledge_level=level,
                    condition=f"off:{strategy}", assistant_model="off", assistant_strategy=strategy,
                    simulator="structured", trial=0, seed=seed, init_seed=seed // 7,
                ))  # fmt: skip
    return specs


def prompt_text(req: ChatRequest) -> str:
    return "".join(f"<{m['role']}>\n{m.get('content') or ''}\n" for m in req.messages)


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on the prefix length
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=15)
    ap.add_argument("--levels", default="novice,intermediate,advanced")
    ap.add_argument("--strategies", default="simple,socratic,adaptive,comprehensive")
    ap.add_argument("--items", type=int, default=0, help="first N demo items (0: all)")
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS)
    ap.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.turns, args.levels, args.strategies, args.items = 4, "novice", "comprehensive", 2
    items = demo_items()
    items = items[: args.items] if args.items else items
    specs = sessions(items, args.levels.split(","), args.strategies.split(","))
    graphs = {item_key(t, k): g for t in ("math", "expertqa") for k, g in demo_graphs(t).items()}
    shard = ShardSpec("bench-tokens", 0, tuple(specs), {item_key(i.task, i.id): i for i in items}, graphs)
    roles = {r: RoleSettings(model="off", temperature=d.temperature, max_tokens=d.max_tokens, attempts=d.attempts,
                             repair_temperature=d.repair_temperature) for r, d in ROLE_DEFAULTS.items()}
    ctx = ShardContext(run_id="bench-tokens", config_hash="bench", rules=reference_rules(),
                       max_turns=args.turns, early_stop="virtual", roles=roles, prompts=args.prompts)
    t0 = time.perf_counter()
    with serve_model_in_thread(OfflineModel(), served_name="offline") as server:
        http = OpenAICompatibleModel(HTTPModelConfig(base_url=server.base_url, model="offline", offline_server=True, max_in_flight=32))
        model = RecordingModel(http)  # the client side of the HTTP path: every request and answer
        models = RoleModels(user_sim=model, extractor=model, assistants={"off": model})  # judges run after the loop (score/)

        async def collect():
            return [r async for r in run_shard(shard, models, ctx)]

        results = asyncio.run(collect())
    wall = time.perf_counter() - t0
    log: list[tuple[ChatRequest, ChatResponse]] = [(c.request, c.response) for c in model.calls]
    failed = [r.session.session_id for r in results if r.session.status != "ok"]
    count = Counter(Path(args.tokenizer) if args.tokenizer else None)

    per_session: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    prompt_total = block_total = 0
    last_text: dict[tuple[str, str], str] = {}
    shares: dict[str, list[float]] = defaultdict(list)
    for req, resp in log:
        sid, role = req.request_id.split("#", 1)[0], req.role
        p = sum(count(m.get("content") or "") for m in req.messages)
        c = count(resp.text or "")
        block = count(old_context_block(dict(req.offline_facts or {})))
        row = per_session[sid][role]
        row["requests"] += 1
        row["prompt_tokens"] += p
        row["completion_tokens"] += c
        row["context_block_tokens"] += block
        prompt_total += p
        block_total += block
        text = prompt_text(req)
        prev = last_text.get((sid, role))
        if prev is not None and text:
            shares[role].append(common_prefix(prev, text) / len(text))
        last_text[(sid, role)] = text

    n = max(1, len(per_session))
    per_role = {}
    for role in ROLES:
        rows = [per_session[s][role] for s in per_session if role in per_session[s]]
        if not rows:
            continue
        per_role[role] = {
            "requests_per_conversation": round(sum(r["requests"] for r in rows) / n, 2),
            "prompt_tokens_per_conversation": round(sum(r["prompt_tokens"] for r in rows) / n, 1),
            "completion_tokens_per_conversation": round(sum(r["completion_tokens"] for r in rows) / n, 1),
            "prompt_tokens_with_context_block_per_conversation": round(
                sum(r["prompt_tokens"] + r["context_block_tokens"] for r in rows) / n, 1
            ),
            "stable_prefix_share": round(sum(shares[role]) / len(shares[role]), 3) if shares[role] else None,
        }
        print(f"{role:10s} {per_role[role]}", file=sys.stderr)
    figures = {
        "bench": "tokens",
        "path": "http (offline model behind serve_model_in_thread, offline_server: true)",
        "prompt_set": args.prompts,
        "counting": count.method,
        "conversations": len(per_session),
        "turns": args.turns,
        "failed_sessions": len(failed),
        "requests": len(log),
        "wall_s": round(wall, 2),
        "per_role": per_role,
        "prompt_tokens_per_conversation": round(prompt_total / n, 1),
        "prompt_tokens_with_context_block_per_conversation": round((prompt_total + block_total) / n, 1),
        "prompt_tokens_vs_context_block_ratio": round(prompt_total / max(1, prompt_total + block_total), 3),
        "stable_prefix_share": {role: v["stable_prefix_share"] for role, v in per_role.items()},
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
