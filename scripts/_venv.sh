# Sourced by the entry scripts (and by hand: `source scripts/_venv.sh`): create or reuse .venv and
# install the project from its own files. It sets no shell options (the caller's `set -e`/`-u`/
# pipefail stay as they were, so a failing step cannot close an interactive shell): each step
# that can fail returns 1 instead.
_rk_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
ROOT="$_rk_root"
VENV="${RAY_KNOWSIM_VENV:-$ROOT/.venv}"
# The interpreter: $PYTHON when set; else the first optimised CPython >= 3.11 found (python3.11
# on PATH and in /usr/bin first, then python3), else the first one that can build a venv. The
# build decides a good part of the client's CPU per request (10-15 % here between a pyenv
# --enable-shared build and Debian's PGO one: scripts/python_build.py, docs/performance.md).
if [ -n "${PYTHON:-}" ]; then
  PY="$PYTHON"
else
  # shellcheck disable=SC2046  # the candidates are words: one path each
  PY="$(python3 "$_rk_root/scripts/python_build.py" --pick $(type -ap python3.11) /usr/bin/python3.11 \
        /usr/local/bin/python3.11 $(type -ap python3) 2>/dev/null)" || PY=python3
fi
STAMP="$VENV/.ray_knowsim_installed"  # holds the extras installed (comma-separated)
# The project's own .venv made on another interpreter than the one chosen (an earlier release
# took the first python3.11 on PATH) is made again on the chosen one; a venv named by
# RAY_KNOWSIM_VENV is the caller's and is never removed.
if [ -z "${RAY_KNOWSIM_VENV:-}" ] && [ -f "$VENV/pyvenv.cfg" ]; then
  _rk_was="$(sed -n 's/^executable *= *//p' "$VENV/pyvenv.cfg")"
  _rk_now="$("$PY" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null || true)"
  if [ -n "$_rk_was" ] && [ -n "$_rk_now" ] && [ "$(realpath "$_rk_was" 2>/dev/null || echo "$_rk_was")" != "$_rk_now" ]; then
    echo "scripts/_venv.sh: making $VENV again on $_rk_now (it was made on $_rk_was)" >&2
    rm -rf "$VENV"
  fi
  unset _rk_was _rk_now
fi
# The extras the caller needs: RAY_KNOWSIM_EXTRAS (set by the entry scripts: demo.sh none, test.sh
# the test tools and the RL adapters' real libraries); by hand, unset: the test tools.
_rk_want="${RAY_KNOWSIM_EXTRAS-dev}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" || { echo "scripts/_venv.sh: could not create $VENV with $PY" >&2; return 1; }
fi
# Reinstall only when pyproject changed since the last install or an extra asked for is missing;
# what was installed before stays (the union is installed), so demo.sh after test.sh installs nothing.
_rk_have="$(cat "$STAMP" 2>/dev/null || true)"
_rk_all="$_rk_have"
for _rk_e in ${_rk_want//,/ }; do
  case ",$_rk_all," in *",$_rk_e,"*) ;; *) _rk_all="${_rk_all:+$_rk_all,}$_rk_e" ;; esac
done
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ] || [ "$_rk_all" != "$_rk_have" ]; then
  { "$VENV/bin/python" -m pip install -q --upgrade pip \
      && "$VENV/bin/python" -m pip install -q -e "$ROOT${_rk_all:+[$_rk_all]}"; } \
    || { echo "scripts/_venv.sh: installing the project into $VENV failed" >&2; return 1; }
  printf '%s\n' "$_rk_all" > "$STAMP"
fi
unset _rk_want _rk_have _rk_all _rk_e
unset _rk_root
export PATH="$VENV/bin:$PATH"
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$ROOT/.numba_cache}"
export RAY_USAGE_STATS_ENABLED=0
