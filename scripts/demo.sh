#!/usr/bin/env bash
# Set up (or reuse) the environment and run the main job on the embedded default:
# the offline deterministic models, local Ray, no GPU, no API key.
#   scripts/demo.sh                 runs configs/demo.yaml into runs/demo
#   scripts/demo.sh --quiet         extra args go to `ray-knowsim run`
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
RAY_KNOWSIM_EXTRAS="${RAY_KNOWSIM_EXTRAS-}"  # the demo needs the package alone
source scripts/_venv.sh
exec ray-knowsim run configs/demo.yaml "$@"
