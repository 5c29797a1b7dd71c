"""Generator of ``golden_requests.txt``: one hash per request that a set of demo sessions sends.

Why: the renderers are tuned for CPU (issue 30: caches of what is static per graph, item and
template; compiled templates), and none of that may change a byte of what is sent. This script
runs in-process shards over the demo items (every item, every knowledge level, every tutor
strategy, the structured learner and every baseline simulator; prompt sets v1, v2 and v3; both
definitions of connectable unknowns) against the offline model, records every request the models
are asked, and writes one line per request: ``<case> <request_id> <hash>``. The hash covers every field of the request in field order
(messages, role, temperature, tokens, seed, schema, schema name, prompt version, id, offline
facts, dict key order included) and the bytes the HTTP client would send (:func:`encode_body` of
``build_payload``) under a strict json_schema endpoint and under our offline server.

``tests/prompts/test_golden_requests.py`` reruns it and compares. Regenerate ONLY when a prompt's
wording or a request field is meant to change (a new prompt set, a new field), never to make a
speed change pass: ``python -m tests.doubles.golden_requests --write``.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path

import orjson

GOLDEN = Path(__file__).resolve().parents[1] / "prompts" / "golden_requests.txt"  # the fixture stays beside its test
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LEVELS = ("novice", "intermediate", "advanced")
STRATEGIES = ("minimal", "adaptive", "socratic", "comprehensive")
BASELINES = ("zero-shot", "zero-shot-cot", "zero-shot-cot-user-profile")
#: (case name, prompt set, connectable mode, whether every item x level x simulator or a rotation)
CASES = (("v3", "v3", "reference", True), ("v3-paper", "v3", "paper", False),
         ("v2", "v2", "reference", False), ("v1", "v1", "reference", False))
MAX_TURNS = 4


class Recorder:
    """Forwards to the offline model and keeps every request it is asked."""

    def __init__(self, inner) -> None:
        self.inner, self.name = inner, inner.name
        self.requests: list = []

    async def generate(self, request):
        self.requests.append(request)
        return await self.inner.generate(request)


def _specs(full: bool):
    from ray_knowsim.demo import demo_items
    from tests.doubles.sim_shard import session

    specs, k = [], 0
    for item in demo_items():
        for level in LEVELS:
            sims = [("structured", s) for s in STRATEGIES] + [(b, STRATEGIES[j % 4]) for j, b in enumerate(BASELINES)]
            for simulator, strategy in sims:
                if full or k % 3 == 0:
                    specs.append(session(item, level, strategy, simulator))
                k += 1
    return specs


def _request_bytes(request) -> bytes:
    fields = [[name, getattr(request, name)] for name in request.__dataclass_fields__]
    return orjson.dumps(fields, option=orjson.OPT_NON_STR_KEYS)


def _bodies(request) -> bytes:
    from ray_knowsim.llm.http.client import OpenAICompatibleModel, encode_body
    from ray_knowsim.llm.http.config import HTTPModelConfig

    out = b""
    for cfg in _CONFIGS:
        out += encode_body(OpenAICompatibleModel(HTTPModelConfig(**cfg)).build_payload(request)) + b"\n"
    return out


_CONFIGS = (
    {"base_url": "http://127.0.0.1:1/v1", "model": "m", "structured_output": "json_schema"},
    {"base_url": "http://127.0.0.1:1/v1", "model": "offline", "structured_output": "json_object",
     "offline_server": True, "thinking": "off"},
)


def _h(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def generate() -> list[str]:
    """Every golden line, in a fixed order (case, then request id)."""
    from dataclasses import replace

    from ray_knowsim.llm.offline import OfflineModel
    from tests.doubles.sim_shard import context, offline_models, run, shard_of

    lines = []
    for case, prompts, connectable, full in CASES:
        rec = Recorder(OfflineModel())
        ctx = replace(context(max_turns=MAX_TURNS), prompts=prompts, connectable=connectable)
        run(shard_of(_specs(full)), offline_models(rec), ctx)
        seen = {}
        for r in rec.requests:
            key = f"{r.request_id}~{len([k for k in seen if k.startswith(r.request_id + '~')])}"
            seen[key] = f"{case} {key} {_h(_request_bytes(r) + _bodies(r))}"
        lines.extend(seen[k] for k in sorted(seen))
    lines.extend(_direct())
    return lines


#: a transcript whose text looks like template syntax and is not ASCII: filled values are inserted
#: verbatim, never expanded again
TRICKY = [["user", "What is {{problem}}? {x} \\frac{1}{2} caf\u00e9 \u2014 \"quoted\"\nnew line"],
          ["assistant", "Think of {{state_json}} as {{ }} and }}{{; also \u00fc\u00df."]]


def _direct() -> list[str]:
    """Renderer paths a run's loop does not take in the demo (hints, termination allowed or not, a
    transcript that looks like template syntax), rendered directly for every item and prompt set."""
    from ray_knowsim.demo import demo_graphs, demo_items
    from ray_knowsim.prompts.render import render_extractor, render_user_first, render_user_turn
    from ray_knowsim.schema.graph import build_index
    from ray_knowsim.simulators import baseline_prompt, render_baseline_user

    lines = []
    graphs = {t: demo_graphs(t) for t in ("math", "expertqa")}
    for prompts in ("v1", "v2", "v3"):
        for k, item in enumerate(demo_items()):
            graph = graphs[item.task][item.id]
            index = build_index(graph, item.id)
            states = [(k + j) % 4 for j in range(index.size)]
            explained = list(index.labels[: 1 + k % 3]) + ["not a label"]
            reqs = {"first": render_user_first(item, graph, states, prompts=prompts, seed=k)}
            for flags in range(8):
                reqs[f"turn{flags}"] = render_user_turn(
                    item, graph, states, TRICKY, explained=explained, allow_terminate=bool(flags & 1),
                    stuck_hint=bool(flags & 2), stop_hint=bool(flags & 4), prompts=prompts, seed=k,
                    connectable="paper" if flags & 1 else "reference", request_id=f"d{k}")
            reqs["extractor"] = render_extractor(item, graph, {"nothing": 1}, TRICKY, "u {{x}}", "a }}", prompts=prompts)
            for b in BASELINES:
                for allow in (False, True):
                    reqs[f"{b}-{allow}"] = render_baseline_user(
                        item, b, TRICKY, graph=graph, initial_states=states, knowledge_level=LEVELS[k % 3],
                        profile="a profile {{goal}}" if allow else "", allow_terminate=allow, prompts=prompts)
            for name, r in reqs.items():
                lines.append(f"direct-{prompts} {item.task}/{item.id}/{name} {_h(_request_bytes(r) + _bodies(r))}")
    return lines


def main(argv: list[str]) -> int:
    lines = generate()
    if argv[:1] == ["--write"]:
        GOLDEN.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(lines)} requests to {GOLDEN}")
        return 0
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
