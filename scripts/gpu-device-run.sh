#!/usr/bin/env bash
# The GPU acceptance run on a lent machine that receives this tree and the bundle (docs/gpu.md,
# "On a lent GPU"): unpacks build/bundle/sketchps-*.tar.gz to /tmp, runs its gpu-check.sh (arguments
# passed on) and leaves in $OUT what comes back: gpu.md, log.txt, results.jsonl and gpu-check.tgz
# (every raw output; the train/ folders' package and run directories left out).
#
#   OUT=/tmp/out bash scripts/gpu-device-run.sh [gpu-check.sh arguments, e.g. --quick or --cpu]
#
# Exit status: gpu-check.sh's; 2 when $OUT is unset or there is no bundle.
set -uo pipefail
cd "$(dirname "$0")/.."
[[ -n ${OUT:-} ]] || { echo "gpu-device-run: OUT is not set (the folder whose files come back)" >&2; exit 2; }
bundle=$(ls build/bundle/sketchps-*.tar.gz 2>/dev/null | head -1)
[[ -n $bundle ]] || { echo "gpu-device-run: no build/bundle/sketchps-*.tar.gz (bash scripts/bundle.sh, then carry it)" >&2; exit 2; }
rm -rf /tmp/sketchps /tmp/gpu-check
tar -xzf "$bundle" -C /tmp || { echo "gpu-device-run: cannot unpack $bundle" >&2; exit 2; }
PYTHONUNBUFFERED=1 /tmp/sketchps/gpu-check.sh --out /tmp/gpu-check "$@"
status=$?
mkdir -p "$OUT"
cp /tmp/gpu-check/gpu.md /tmp/gpu-check/log.txt /tmp/gpu-check/results.jsonl "$OUT/" 2>/dev/null
tar -C /tmp -czf "$OUT/gpu-check.tgz" --exclude=gpu-check/train/pkg --exclude=gpu-check/train/pkg-src \
  --exclude='gpu-check/train/train-*/checkpoints' --exclude='gpu-check/train/*.pt' gpu-check
echo "gpu-device-run: gpu-check exit $status; $(du -h "$OUT/gpu-check.tgz" | cut -f1) of raw outputs in \$OUT/gpu-check.tgz"
exit $status
