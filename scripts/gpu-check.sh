#!/usr/bin/env bash
# The GPU acceptance run (docs/gpu.md): on a machine with one CUDA GPU, from the relocatable bundle
# (scripts/bundle.sh), within a time budget (default 8 minutes), in this order:
#   tests    the unit suites (kernels, engine, schemes) on the CUDA kernels, each as parallel shards
#            that share the GPU (suite-shards.sh);
#   nogpu    the CUDA kernels with CUDA_VISIBLE_DEVICES empty exit 2 naming what they looked for;
#   bench    the primitives at d = 25.6M next to PyTorch's own operations on the same card
#            (bench/gpu/torch_peers.py; needs python3 with a CUDA torch);
#   train    4 GPU worker processes sharing the GPU (the Python package pip-installed from the bundle
#            against the machine's own PyTorch), the same job on the CPU kernels, and one with ranks
#            0-1 on the GPU and 2-3 on the CPU: final accuracies within 0.5 points (train-check.sh);
#   loadgen  every scheme in both modes at P = 4 and 8, each round through the real servers or peers;
#   repro    the seed's claim on the GPU kernels: loadgen gs-SGD against gTop-k (PS and tree) and
#            Sketched-SGD at d = 25M, P = 4, 8 and 16, both modes (docs/reports/reproduction.md);
#            the configurations a cut leaves finished are tabulated.
# A stage that would start with less than a minute of the budget left is not run, and says so.
# Results go to OUT (default ./gpu-check): log.txt, results.jsonl (every check), the raw outputs and
# gpu.md (the tables of docs/gpu.md, bench/gpu/gpu_report.py). Exit 0 when every check passed.
#
#   sketchps/gpu-check.sh [--out DIR] [--quick] [--skip STAGE,...] [--memcheck] [--cpu]
#
# --quick: smaller loadgen, job and d = 25M sweep (a smoke run); --memcheck: compute-sanitizer over
# one short loadgen configuration per mode as well; --cpu: a rehearsal on a machine without a GPU
# (every stage on the CPU kernels, nogpu left out: the plumbing, not the GPU). Seconds:
# GPU_CHECK_BUDGET (the whole run, 480), GPU_CHECK_SUITE_TIMEOUT (a suite, 240; GPU_CHECK_SUITE_SHARDS
# processes per suite, default half the cores up to 8, 1 with --cpu),
# GPU_CHECK_MEMCHECK_TIMEOUT (240), GPU_CHECK_TRAIN_TIMEOUT (both jobs, 300), GPU_CHECK_REPRO_TIMEOUT
# (the d = 25M sweep, 200); each is cut to what the budget has left. GPU_CHECK_REPRO_PARAMS changes the
# sweep's d (a rehearsal on a CPU: 25M takes minutes per configuration on two cores).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=gpu-check; quick=0; memcheck=0; cpu=0; skip=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --memcheck) memcheck=1; shift ;;
    --cpu) cpu=1; shift ;;
    --skip) skip="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" && out=$(cd "$out" && pwd)
log="$out/log.txt"; : >"$log"
results="$out/results.jsonl"; : >"$results"
start=$(date +%s); budget=${GPU_CHECK_BUDGET:-480}
failed=()

say() { echo "gpu-check [$(( $(date +%s) - start ))s] $*" | tee -a "$log" >&2; }
record() { echo "$1" >>"$results"; }  # one JSON object per line
left() { echo $(( budget - ($(date +%s) - start) )); }
limit() { local l; l=$(left); echo $(( $1 < l ? $1 : (l > 1 ? l : 1) )); }  # a stage's timeout within the budget
# Whether a stage runs: not --skip'ed, and a minute of the budget left (else recorded as not run).
runs() {
  [[ ",$skip," == *",$1,"* ]] && return 1
  if (( $(left) < 60 )); then
    say "$1: not run, $(left) s of the ${budget} s budget left"; record "{\"check\":\"$1\",\"not_run\":\"budget\"}"
    failed+=("$1"); return 1
  fi
}

# The bundle's layout (bin/, lib/, lib/cuda/, libexec/sketchps/tests/) or a build tree's.
if [[ -x "$here/bin/sketchps-bench" ]]; then
  bin="$here/bin"; cuda_lib="$here/lib/cuda"; tests="$here/libexec/sketchps/tests"
  peers="$here/bench/torch_peers.py"; report="$here/bench/gpu_report.py"; table="$here/bench/table.py"
  train_check="$here/train-check.sh"
else
  root=$(cd "$here/.." && pwd)
  bin="$root/build/ci"; cuda_lib="$root/build/ci/lib/cuda"; tests="$root/build/ci/tests"
  peers="$root/bench/gpu/torch_peers.py"; report="$root/bench/gpu/gpu_report.py"
  table="$root/bench/reproduction/table.py"; train_check="$root/scripts/train-check.sh"
fi
find_bin() { for d in "$bin" "$bin/tools" "$bin/server" "$bin/bench"; do [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }; done; echo "$1"; }
bench_bin=$(find_bin sketchps-bench)
front=$(find_bin sketchps)
kernels=cuda
if [[ $cpu -eq 1 ]]; then kernels=cpu; skip="$skip,nogpu"; else export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
export OMP_WAIT_POLICY=PASSIVE

# The unit suites, each as parallel shards (suite-shards.sh): GPU_CHECK_SUITE_SHARDS processes, by
# default half the cores up to 8 on a GPU and 1 with --cpu (the CPU kernels use every core already).
stage_tests() {
  local suite exe t0 rc dt summary shards=${GPU_CHECK_SUITE_SHARDS:-}
  if [[ -z $shards ]]; then shards=$(( $(nproc --all) / 2 )); (( shards > 8 )) && shards=8; (( shards < 1 || cpu == 1 )) && shards=1; fi
  for suite in kernels engine schemes; do
    exe=$(ls "$tests"/sketchps_${suite}_tests "$tests"/*/sketchps_${suite}_tests 2>/dev/null | head -1)
    [[ -n "$exe" ]] || { say "suite $suite: binary not found under $tests"; failed+=("suite-$suite"); continue; }
    t0=$(date +%s.%N)
    summary=$(bash "$here/suite-shards.sh" "$exe" "$shards" "$(limit "${GPU_CHECK_SUITE_TIMEOUT:-240}")" \
      "$out/suite-$suite.txt" "~[.]~[processes]~[accuracy]" 2>>"$log" | tail -1)
    rc=$?
    dt=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t0}")
    say "suite $suite: exit $rc in $dt s: $summary"
    record "{\"check\":\"suite\",\"suite\":\"$suite\",\"exit\":$rc,\"seconds\":$dt,\"summary\":\"$summary\"}"
    [[ $rc -eq 0 ]] || failed+=("suite-$suite")
    grep -E "^[0-9.]+ s: " "$out/suite-$suite.txt" | sort -rn | head -5 >>"$log"
  done
}

stage_nogpu() {
  local msg rc
  msg=$(CUDA_VISIBLE_DEVICES= "$bench_bin" bench --d 1000 2>&1)
  rc=$?
  say "no GPU visible: exit $rc: $(echo "$msg" | head -1)"
  record "{\"check\":\"nogpu\",\"exit\":$rc}"
  [[ $rc -eq 2 && "$msg" == *"no CUDA device"* ]] || failed+=("nogpu")
}

stage_bench() {
  local d=25600000 rc
  [[ $quick -eq 1 ]] && d=2560000
  timeout -k 10 "$(limit 120)" "$bench_bin" bench --d "$d" --density 0.001 --repeats 5 --json >"$out/bench.json" 2>>"$log"
  rc=$?
  say "sketchps-bench bench at d = $d: exit $rc"
  record "{\"check\":\"bench\",\"d\":$d,\"exit\":$rc}"
  [[ $rc -eq 0 ]] || failed+=("bench")
  if [[ $cpu -eq 0 ]] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    timeout -k 10 "$(limit 120)" python3 "$peers" --d "$d" --density 0.001 --rows 5 --cols 256000 2560000 \
      --out "$out/torch_peers.json" 2>>"$log"
    say "torch peers: exit $?"
  else
    say "torch peers: not run (no CUDA torch, or --cpu)"
  fi
}

stage_train() {
  local rc
  [[ -f "$train_check" ]] || { say "training job: not run (no $train_check)"; failed+=("train"); return; }
  timeout -k 15 "$(limit "${GPU_CHECK_TRAIN_TIMEOUT:-300}")" bash "$train_check" "$out/train" \
    $([[ $quick -eq 1 ]] && echo --quick) $([[ $cpu -eq 1 ]] && echo --kernels cpu) >>"$log" 2>&1
  rc=$?
  cat "$out/train/results.jsonl" >>"$results" 2>/dev/null
  say "training job, 4 worker processes on the $kernels kernels$([[ $cpu -eq 0 ]] && echo ', the same job on the CPU and one with 2 ranks on each'): exit $rc"
  [[ $rc -eq 0 ]] || failed+=("train")
}

stage_repro() {  # one loadgen per P, so that a budget cut keeps the smaller P's results
  local workers="4 8 16" p rc files=() stage_end
  [[ $quick -eq 1 ]] && workers="4"
  stage_end=$(( $(date +%s) + $(limit "${GPU_CHECK_REPRO_TIMEOUT:-200}") ))
  for p in $workers; do
    (( stage_end - $(date +%s) >= 20 )) || { say "repro P = $p: not run, the stage's time is spent"; failed+=("repro-p$p"); continue; }
    rm -f "$out/gpu-flat25m-p$p.json"  # an earlier run's must not be tabulated as this one's
    timeout -k 40 $(( stage_end - $(date +%s) )) "$front" loadgen --mode ps,decentralized --workers "$p" --servers 2 \
      --params "${GPU_CHECK_REPRO_PARAMS:-25000000}" --schemes gs_sgd,gtopk,sketched_sgd,gtopk_tree --rounds 3 --warmup-rounds 1 \
      --timeout-seconds 120 --work-dir "$out/repro-p$p" --out "$out/gpu-flat25m-p$p.json" >"$out/repro-p$p.txt" 2>&1
    rc=$?
    say "loadgen d = ${GPU_CHECK_REPRO_PARAMS:-25000000}, P = $p (gs_sgd, gtopk, sketched_sgd, gtopk_tree; both modes): exit $rc"
    record "{\"check\":\"repro\",\"workers\":$p,\"exit\":$rc}"
    [[ $rc -eq 0 ]] || { failed+=("repro-p$p"); tail -20 "$out/repro-p$p.txt" >>"$log"; }
    [[ -s "$out/gpu-flat25m-p$p.json" ]] && files+=("$out/gpu-flat25m-p$p.json")  # a cut run's finished ones too
  done
  [[ ${#files[@]} -gt 0 && -f "$table" ]] && { python3 "$table" "${files[@]}" >"$out/repro.md" 2>>"$log" || say "repro table failed"; }
}

stage_loadgen() {
  local workers="4,8" rounds=10 params=1000000 mode rc
  [[ $quick -eq 1 ]] && { workers="4"; rounds=5; params=200000; }
  for mode in ps decentralized; do
    timeout -k 40 "$(limit 180)" "$front" loadgen --mode "$mode" --workers "$workers" --servers 2 --params "$params" \
      --rounds "$rounds" --warmup-rounds 2 --timeout-seconds 60 --work-dir "$out/loadgen-$mode" --out "$out/loadgen-$mode.json" >"$out/loadgen-$mode.txt" 2>&1
    rc=$?
    say "loadgen $mode (P = $workers, d = $params, $rounds rounds, every scheme): exit $rc"
    record "{\"check\":\"loadgen\",\"mode\":\"$mode\",\"exit\":$rc}"
    [[ $rc -eq 0 ]] || { failed+=("loadgen-$mode"); tail -20 "$out/loadgen-$mode.txt" >>"$log"; }
  done
  [[ $memcheck -eq 1 ]] && command -v compute-sanitizer >/dev/null || return 0
  for mode in ${GPU_CHECK_MEMCHECK_MODES:-ps decentralized}; do
    timeout -k 15 "$(limit "${GPU_CHECK_MEMCHECK_TIMEOUT:-240}")" compute-sanitizer --tool memcheck --target-processes all \
      --print-limit 20 "$front" loadgen --mode "$mode" --workers 2 --servers 2 --params 100000 --rounds 3 \
      --warmup-rounds 1 --schemes gs_sgd,topk,sketched_sgd,gtopk >"$out/memcheck-$mode.txt" 2>&1
    rc=$?
    errors=$(grep -E "ERROR SUMMARY: [0-9]+" -o "$out/memcheck-$mode.txt" | awk '{s+=$3} END {print s+0}')
    say "memcheck loadgen $mode: exit $rc, $errors errors"
    record "{\"check\":\"memcheck\",\"mode\":\"$mode\",\"exit\":$rc,\"errors\":$errors}"
    [[ $rc -eq 0 && $errors -eq 0 ]] || failed+=("memcheck-$mode")
  done
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); gpu=${gpu:-none (no nvidia-smi answer)}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
say "machine: GPU $gpu, driver ${driver:-none}, $(nproc --all) cores"
say "kernels: $("$bench_bin" --version 2>&1)"
record "{\"check\":\"machine\",\"gpu\":\"$gpu\",\"driver\":\"${driver:-none}\",\"kernels\":\"$kernels\",\"budget_s\":$budget}"
for stage in tests nogpu bench train loadgen repro; do
  runs "$stage" && "stage_$stage"
done
[[ -f "$report" ]] && python3 "$report" "$out" >"$out/gpu.md" 2>>"$log"
say "done in $(( $(date +%s) - start )) s; failed: ${failed[*]:-none}; tables in $out/gpu.md"
[[ ${#failed[@]} -eq 0 ]]
