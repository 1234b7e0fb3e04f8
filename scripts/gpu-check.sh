#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu.md): on a machine with one CUDA GPU, from the relocatable bundle
# (scripts/bundle.sh), in at most 8 minutes on an H100/H200-class card:
#   1. the unit suites (kernels, engine, schemes) on the CUDA kernels;
#   2. no GPU: the CUDA kernels with CUDA_VISIBLE_DEVICES empty exit 2 naming what they looked for;
#   3. the primitives' benchmark at d = 25.6M next to PyTorch's own operations on the same card
#      (bench/gpu/torch_peers.py; needs python3 with a CUDA torch);
#   4. loadgen: every scheme in both modes at P = 4 and 8, each round through the real servers or peers;
#   5. one training job of 4 GPU worker processes sharing the GPU (the Python package over the
#      machine's own CUDA PyTorch, installed from the bundle), next to the same job on the CPU kernels.
# Results go to OUT (default ./gpu-check): log.txt, results.json (every figure) and gpu.md (the
# tables of docs/gpu.md). Exit 0 when every check passed.
#
#   sketchps/gpu-check.sh [--out DIR] [--quick] [--skip tests,bench,loadgen,train,nogpu] [--memcheck]
#
# --quick: smaller loadgen and job (a smoke run); --memcheck: compute-sanitizer over one short
# loadgen configuration per mode as well. Time limits: GPU_CHECK_SUITE_TIMEOUT (a suite, default
# 240 s) and GPU_CHECK_MEMCHECK_TIMEOUT (240 s).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=gpu-check
quick=0
memcheck=0
skip=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --memcheck) memcheck=1; shift ;;
    --skip) skip="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
log="$out/log.txt"
: >"$log"
results="$out/results.jsonl"
: >"$results"
start=$(date +%s)
failed=()

say() { echo "gpu-check [$(( $(date +%s) - start ))s] $*" | tee -a "$log" >&2; }
record() { echo "$1" >>"$results"; }  # one JSON object per line
skipped() { [[ ",$skip," == *",$1,"* ]]; }

# The bundle's layout (bin/, lib/, lib/cuda/, libexec/sketchps/tests/) or a build tree's.
if [[ -x "$here/bin/sketchps-bench" ]]; then
  bin="$here/bin"; cuda_lib="$here/lib/cuda"; tests="$here/libexec/sketchps/tests"; pkg="$here/python"
  peers="$here/bench/torch_peers.py"
else
  root=$(cd "$here/.." && pwd)
  bin="$root/build/ci/bin"; [[ -d $bin ]] || bin="$root/build/ci"
  cuda_lib="$root/build/ci/lib/cuda"; tests="$root/build/ci/tests"; pkg="$root/python"
  peers="$root/bench/gpu/torch_peers.py"
fi
find_bin() { for d in "$bin" "$bin/tools" "$bin/server" "$bin/bench"; do [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }; done; echo "$1"; }
bench_bin=$(find_bin sketchps-bench)
front=$(find_bin sketchps)
export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=PASSIVE

say "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "kernels: $("$bench_bin" --version 2>&1)"
record "{\"check\":\"machine\",\"gpu\":\"$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)\",\"driver\":\"$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)\"}"

# 1. Unit suites.
if ! skipped tests; then
  for suite in kernels engine schemes; do
    exe=$(ls "$tests"/sketchps_${suite}_tests "$tests"/*/sketchps_${suite}_tests 2>/dev/null | head -1)
    [[ -n "$exe" ]] || { say "suite $suite: binary not found under $tests"; failed+=("suite-$suite"); continue; }
    t0=$(date +%s.%N)
    timeout "${GPU_CHECK_SUITE_TIMEOUT:-240}" "$exe" "~[.]~[processes]~[accuracy]" --durations yes >"$out/suite-$suite.txt" 2>&1
    rc=$?
    dt=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t0}")
    summary=$(grep -E "^(All tests passed|test cases:)" "$out/suite-$suite.txt" | tail -1)
    say "suite $suite: exit $rc in $dt s: $summary"
    record "{\"check\":\"suite\",\"suite\":\"$suite\",\"exit\":$rc,\"seconds\":$dt,\"summary\":\"$summary\"}"
    [[ $rc -eq 0 ]] || failed+=("suite-$suite")
    grep -E "^[0-9.]+ s: " "$out/suite-$suite.txt" | sort -rn | head -5 >>"$log"
  done
fi

# 2. No GPU: a clear error and exit 2.
if ! skipped nogpu; then
  msg=$(CUDA_VISIBLE_DEVICES= "$bench_bin" bench --d 1000 2>&1)
  rc=$?
  say "no GPU visible: exit $rc: $(echo "$msg" | head -1)"
  record "{\"check\":\"nogpu\",\"exit\":$rc}"
  [[ $rc -eq 2 && "$msg" == *"no CUDA device"* ]] || failed+=("nogpu")
fi

# 3. Primitives next to PyTorch.
if ! skipped bench; then
  "$bench_bin" bench --d 25600000 --density 0.001 --repeats 5 --json >"$out/bench.json" 2>>"$log"
  rc=$?
  say "sketchps-bench bench at d = 25.6M: exit $rc"
  [[ $rc -eq 0 ]] || failed+=("bench")
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    python3 "$peers" --d 25600000 --density 0.001 --rows 5 --cols 256000 2560000 --out "$out/torch_peers.json" 2>>"$log"
    say "torch peers: exit $?"
  else
    say "torch peers: skipped (python3 has no CUDA torch)"
  fi
fi

# 4. loadgen: every scheme, both modes.
if ! skipped loadgen; then
  workers="4,8"; rounds=20; params=1000000
  [[ $quick -eq 1 ]] && { workers="4"; rounds=5; params=200000; }
  for mode in ps decentralized; do
    "$front" loadgen --mode "$mode" --workers "$workers" --servers 2 --params "$params" --rounds "$rounds" \
      --warmup-rounds 2 --timeout-seconds 120 --out "$out/loadgen-$mode.json" >"$out/loadgen-$mode.txt" 2>&1
    rc=$?
    say "loadgen $mode (P = $workers, d = $params, $rounds rounds, every scheme): exit $rc"
    record "{\"check\":\"loadgen\",\"mode\":\"$mode\",\"exit\":$rc}"
    [[ $rc -eq 0 ]] || { failed+=("loadgen-$mode"); tail -20 "$out/loadgen-$mode.txt" >>"$log"; }
  done
  if [[ $memcheck -eq 1 ]] && command -v compute-sanitizer >/dev/null; then
    for mode in ${GPU_CHECK_MEMCHECK_MODES:-ps decentralized}; do
      timeout "${GPU_CHECK_MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --target-processes all --print-limit 20 \
        "$front" loadgen --mode "$mode" --workers 2 --servers 2 --params 100000 --rounds 3 --warmup-rounds 1 \
        --schemes gs_sgd,topk,sketched_sgd,gtopk >"$out/memcheck-$mode.txt" 2>&1
      rc=$?
      errors=$(grep -E "ERROR SUMMARY: [0-9]+" -o "$out/memcheck-$mode.txt" | awk '{s+=$3} END {print s+0}')
      say "memcheck loadgen $mode: exit $rc, $errors errors"
      record "{\"check\":\"memcheck\",\"mode\":\"$mode\",\"exit\":$rc,\"errors\":$errors}"
      [[ $rc -eq 0 && $errors -eq 0 ]] || failed+=("memcheck-$mode")
    done
  fi
fi

# 5. Training: 4 GPU worker processes sharing the GPU (the Python package), and the same job on the CPU kernels.
if ! skipped train; then
  if [[ -x "$here/train-check.sh" ]]; then
    bash "$here/train-check.sh" "$out" $([[ $quick -eq 1 ]] && echo --quick) >>"$log" 2>&1
    rc=$?
    say "training job, 4 GPU workers: exit $rc"
    [[ $rc -eq 0 ]] || failed+=("train")
  else
    say "training job: skipped (no train-check.sh in this bundle)"
  fi
fi

say "done in $(( $(date +%s) - start )) s; failed: ${failed[*]:-none}"
[[ ${#failed[@]} -eq 0 ]]
