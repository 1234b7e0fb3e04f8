#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the embedded default job with
# `sketchps run`: top-k with error feedback, the CNN on Fashion-MNIST, 4 workers and 2 servers as local processes, one
# epoch. Extra arguments go to `sketchps run` (e.g. --set scheme.name=topk, --job my.yaml,
# --out runs/x; see `build/ci/tools/sketchps run --help`). The run directory (summary.json,
# metrics.jsonl, logs) is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh ci
exec build/ci/tools/sketchps run "$@"
