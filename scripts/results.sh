#!/usr/bin/env bash
# Runs the default job (sketchps run: CNN, Fashion-MNIST, 4 workers, 2 servers, one epoch) once per
# scheme and prints the markdown table of docs/results.md. Evaluates every 100 rounds so the
# accuracy curve is in each run's metrics.jsonl, and draws the curves of every scheme side by side
# (<out>/accuracy.png and .svg). Usage: scripts/results.sh [OUT_DIR] [--set k=v]...
# Each scheme's run directory is made afresh (sketchps run refuses one that holds a previous run).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/results}
shift || true
bash scripts/build.sh ci
schemes=(dense topk dgc gtopk sketched_sgd gs_sgd sdagc sidco scalecom)
dirs=()
for s in "${schemes[@]}"; do
  echo "results: $s" >&2
  rm -rf "${out:?}/$s"
  build/ci/tools/sketchps run --out "$out/$s" --no-progress --set scheme.name="$s" \
    --set train.eval_every_rounds=100 --set job_id="results-$s" "$@" >&2
  dirs+=("$out/$s")
done
build/ci/tools/sketchps report "${dirs[@]}" --plot "$out/accuracy"
