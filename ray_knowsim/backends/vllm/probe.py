"""The ``vllm`` backend's check before spending: the engine's context from its entry or its local
model directory (no engine starts)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ray_knowsim.backends.probe import Capacity


async def probe_vllm(entry: Any, key: str, limiter: Any = None) -> Capacity:
    """The self-hosted engine's context from its entry or its local model directory (no engine
    starts, no request is sent: ``limiter`` is unused)."""
    vcfg = entry.vllm_config()
    cap = Capacity(where=f"self-hosted vLLM {vcfg.model}", checked="entry")
    limit = vcfg.engine_args().get("max_model_len")
    if limit:
        cap.max_model_len, cap.limit_source = int(limit), "the entry's max_model_len"
        cap.setting = f"models.{key}.max_model_len: {{n}}"
        return cap
    found = _local_context(vcfg.model)
    if found:
        cap.max_model_len, cap.limit_source = found, "max_position_embeddings in the model's config.json"
        cap.checked = "model config.json"
        cap.setting = f"models.{key}.max_model_len: {{n}}, where the model's own {found:,} allows it"
    else:
        cap.checked = "not checked: no max_model_len in the entry and no local config.json"
    return cap


def _local_context(model: str) -> int | None:
    path = Path(os.path.expanduser(model)) / "config.json"
    try:
        conf = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for part in (conf, conf.get("text_config") or {}):
        value = part.get("max_position_embeddings") if isinstance(part, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


__all__ = ["probe_vllm"]
