# Sourced by the entry scripts: create or reuse .venv and install the project from its own files.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RAY_KNOWSIM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
STAMP="$VENV/.ray_knowsim_installed"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Reinstall only when pyproject changed since the last install.
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$ROOT[dev,training]"  # training: the RL adapters' real libraries, for their tests
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$ROOT/.numba_cache}"
export RAY_USAGE_STATS_ENABLED=0
