#!/usr/bin/env bash
# The GPU acceptance run on a lent machine that receives this tree and the bundle (docs/gpu.md,
# "On a lent GPU"): unpacks build/bundle/sketchps-*.tar.gz to /tmp, runs its gpu-check.sh (arguments
# passed on) and leaves in $OUT what comes back: gpu.md, log.txt, results.jsonl and gpu-check.tgz
# (every raw output; the train/ folders' package, run state and checkpoints left out).
#
#   OUT=/tmp/out bash scripts/gpu-device-run.sh [gpu-check.sh arguments, e.g. --quick or --cpu]
#
# The machine's call has a hard limit: gpu-check runs under GPU_CHECK_BUDGET + 60 s at most (500 s
# of budget keep the whole call under 600 s), log.txt and results.jsonl are copied to $OUT every 15 s
# while it runs, and whatever it left is packed on any exit, so a cut run still brings back what it
# did. The bundle's scripts are compared with this tree's first: a bundle that is not this tree's is
# named in $OUT/bundle.txt and on stderr (rebuild it: bash scripts/bundle.sh).
#
# Exit status: gpu-check.sh's (124 or 137 when cut); 2 when $OUT is unset or there is no bundle.
set -uo pipefail
cd "$(dirname "$0")/.."
[[ -n ${OUT:-} ]] || { echo "gpu-device-run: OUT is not set (the folder whose files come back)" >&2; exit 2; }
bundle=$(ls build/bundle/sketchps-*.tar.gz 2>/dev/null | head -1)
[[ -n $bundle ]] || { echo "gpu-device-run: no build/bundle/sketchps-*.tar.gz (bash scripts/bundle.sh, then carry it)" >&2; exit 2; }
mkdir -p "$OUT"
rm -rf /tmp/sketchps /tmp/gpu-check
tar -xzf "$bundle" -C /tmp || { echo "gpu-device-run: cannot unpack $bundle" >&2; exit 2; }
echo "gpu-device-run: bundle of commit $(cat /tmp/sketchps/COMMIT 2>/dev/null || echo unknown)" | tee "$OUT/bundle.txt"
for f in gpu-check.sh suite-shards.sh train-check.sh; do
  cmp -s "scripts/$f" "/tmp/sketchps/$f" ||
    echo "gpu-device-run: WARNING: the bundle's $f differs from this tree's: the bundle is not this tree's" |
    tee -a "$OUT/bundle.txt" >&2
done

pack() {
  cp /tmp/gpu-check/gpu.md /tmp/gpu-check/log.txt /tmp/gpu-check/results.jsonl "$OUT/" 2>/dev/null
  tar -C /tmp -czf "$OUT/gpu-check.tgz" --exclude=gpu-check/train/pkg --exclude=gpu-check/train/pkg-src \
    --exclude='gpu-check/train/train-*/checkpoints' --exclude='gpu-check/train/train-*/worker-state' \
    --exclude='gpu-check/train/*.pt' gpu-check 2>/dev/null
  # The device tool brings back files up to 16 MiB: a larger archive keeps the reports only.
  if [[ $(stat -c %s "$OUT/gpu-check.tgz" 2>/dev/null || echo 0) -gt $((15 * 1024 * 1024)) ]]; then
    tar -C /tmp -czf "$OUT/gpu-check.tgz" --exclude='*/worker-*.log' --exclude='*/loadgen.log' \
      --exclude='gpu-check/train' gpu-check 2>/dev/null
    echo "gpu-device-run: raw outputs over 15 MiB: packed without the train/ folder and the per-process logs" >&2
  fi
}
copier=""; check=""
finish() {  # once: stop the check (when this script is stopped) and the copier, then pack
  trap - EXIT TERM INT
  [[ -n $check ]] && kill "$check" 2>/dev/null && wait "$check" 2>/dev/null
  [[ -n $copier ]] && kill "$copier" 2>/dev/null
  pack
}
trap finish EXIT
trap 'finish; exit 143' TERM INT

budget=${GPU_CHECK_BUDGET:-480}
( while sleep 15; do cp /tmp/gpu-check/log.txt /tmp/gpu-check/results.jsonl "$OUT/" 2>/dev/null; done ) \
  >/dev/null 2>&1 &
copier=$!
# In the background, so that a TERM to this script is handled at once (bash runs traps between commands).
PYTHONUNBUFFERED=1 GPU_CHECK_BUDGET=$budget timeout -k 10 $((budget + 60)) /tmp/sketchps/gpu-check.sh \
  --out /tmp/gpu-check "$@" &
check=$!
wait "$check"
status=$?
check=""
# A cut gpu-check wrote no report, or one cut short: make it from what is there.
if [[ ( ! -s /tmp/gpu-check/gpu.md || $status -eq 124 || $status -eq 137 ) && -f /tmp/sketchps/bench/gpu_report.py ]]; then
  python3 /tmp/sketchps/bench/gpu_report.py /tmp/gpu-check >/tmp/gpu-check/gpu.md 2>>/tmp/gpu-check/log.txt
fi
finish
echo "gpu-device-run: gpu-check exit $status; $(du -h "$OUT/gpu-check.tgz" | cut -f1) of raw outputs in \$OUT/gpu-check.tgz"
exit $status
