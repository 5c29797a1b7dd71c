#!/usr/bin/env bash
# GPU smoke test of the self-hosted model path (backends/vllm/), for a machine with an NVIDIA GPU,
# vLLM (the `gpu` extra: vllm==0.32.0) and this project installed:
#   pip install -e ".[gpu]" && bash scripts/gpu_smoke.sh            # SMOKE_MODEL=org/model to choose
# At most 10 minutes (a hard timeout). It cannot run on the CPU-only machines the tests use; there
# only `bash -n scripts/gpu_smoke.sh` and tests/backends/test_gpu_smoke.py (its CPU-safe parts) run.
# Steps: imports and driver, pool start, 64 structured requests of every role that all parse,
# overlong-request isolation, concurrent callers, determinism at temperature 0 across batch mixes,
# prefix-cache hits, a 2-turn simulation, shutdown and released memory. Last line: one JSON object.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
export RAY_USAGE_STATS_ENABLED=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
command -v nvidia-smi >/dev/null || { echo "FAIL: nvidia-smi not found (no NVIDIA driver)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
"$PY" -c "import vllm, ray, torch; print('vllm', vllm.__version__, 'ray', ray.__version__, 'torch', torch.__version__)" \
  || { echo "FAIL: vllm/ray/torch not importable with $PY"; exit 2; }
exec timeout --signal=INT --kill-after=30 570 "$PY" scripts/gpu_smoke.py
