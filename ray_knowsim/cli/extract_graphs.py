"""`ray-knowsim extract-graphs`: IU graphs for new items, validated and merged into a cache file."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("extract-graphs", help="extract IU graphs for items missing from a graph cache")
    p.add_argument("items", type=Path, help="items JSONL (MATH or ExpertQA format)")
    p.add_argument("--out", type=Path, required=True, help="graph cache to create or extend (existing entries are kept)")
    p.add_argument("--model", default="offline", help='"offline" or the model name served at --base-url')
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", help="NAME of the environment variable holding the API key")
    p.add_argument("--structured-output", choices=("json_schema", "json_object", "none"), default="json_schema")
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--task", choices=("math", "expertqa"), help="item format (inferred when omitted)")
    p.set_defaults(func=run)


def _model(args: argparse.Namespace):  # noqa: ANN202
    if args.base_url is None:
        if args.model != "offline":
            raise SystemExit("error: --base-url is required for a non-offline model")
        from ray_knowsim.llm.offline import OfflineModel

        return OfflineModel(include_demo_graphs=False)
    from ray_knowsim.llm.http.client import OpenAICompatibleModel
    from ray_knowsim.llm.http.config import HTTPModelConfig

    cfg = HTTPModelConfig(base_url=args.base_url, model=args.model, api_key_env=args.api_key_env, structured_output=args.structured_output)
    return OpenAICompatibleModel(cfg)


def _write_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    from ray_knowsim.io.loaders import LoadError, load_items
    from ray_knowsim.graph_extraction.extract import extract_graphs

    try:
        items = load_items(args.items, task=args.task)
        existing = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    except (LoadError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not isinstance(existing, dict):
        print(f"error: {args.out} is not a graph cache (expected a JSON object)", file=sys.stderr)
        return 2
    todo = [item for item in items if item.id not in existing]
    print(f"{len(items) - len(todo)} of {len(items)} items already in {args.out}; extracting {len(todo)}", file=sys.stderr)
    async def extract_all(model):  # noqa: ANN001, ANN202
        try:
            return await extract_graphs(model, todo, max_tokens=args.max_tokens)
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    results = asyncio.run(extract_all(_model(args))) if todo else []
    merged = dict(existing)
    failed = 0
    for res in results:
        for w in res.warnings:
            print(f"warning: {res.item_id}: {w}", file=sys.stderr)
        if res.graph is None:
            failed += 1
            print(f"error: {res.item_id}: {res.error} after {res.attempts} attempts: {res.detail}", file=sys.stderr)
            continue
        merged[res.item_id] = res.graph.to_json_dict()
    _write_atomic(args.out, merged)
    print(f"wrote {args.out}: {len(merged)} graphs ({len(results) - failed} new, {failed} failed)")
    return 1 if failed else 0
