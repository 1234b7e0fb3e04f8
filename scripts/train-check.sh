#!/usr/bin/env bash
# The GPU acceptance run's training job (scripts/gpu-check.sh stage train, docs/gpu.md): the Python
# package installed with pip against this machine's python3 and its torch (from the bundle's python/
# and lib/; in a build tree, the build's own package), then examples/pytorch/fashion_mnist.py trained
# by `sketchps run --script` with 4 worker processes and 2 shards, once per --kernels entry (default
# cuda, cpu, mixed: the 4 ranks share the GPU; the same job on the CPU kernels; ranks 0 and 1 on the
# GPU and ranks 2 and 3 on the CPU in one job, whose replicas the shards compare every round), and
# the final test accuracies of cuda and of mixed compared with cpu's (at most --tolerance points
# apart, default 0.5). With mixed, a decentralized job on the same two backends must be refused at
# its start.
#
#   train-check.sh OUT [--quick] [--kernels cuda,cpu,mixed] [--data DIR] [--tolerance 0.5] [--python PATH]
#
# Job: the example's (gs-SGD at density 0.01, SGD with momentum, batch 32 per worker, cosine
# schedule) on 30,000 training images for 2 epochs, 468 rounds (--quick: 8,000 images, 1 epoch, 62
# rounds); data: --data, else /usr/share/datasets/fashion-mnist, else the bundle's
# share/fashion-mnist (scripts/bundle.sh); python: --python, else python3 on PATH (it needs torch).
# Writes OUT/versions.txt (python, torch, pybind11) and OUT/pip.txt when it installs the package,
# OUT/train-<kernels>/ (the run directories: summary.json, every process's log) and one JSON line per
# job and one for each comparison to OUT/results.jsonl. Exit 0 when every job trained on the kernels
# it asked for and the accuracies agree; 1 otherwise; 2 bad usage or nothing to train with (the
# message names it).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,22p' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -ge 1 && $1 != -* ]] || { echo "train-check: the first argument is the output folder (see --help)" >&2; usage >&2; exit 2; }
out=$1; shift
quick=0; kernels="cuda,cpu,mixed"; data=""; tolerance=0.5; python=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --kernels) kernels="${2:-}"; shift 2 ;;
    --data) data="${2:-}"; shift 2 ;;
    --tolerance) tolerance="${2:-}"; shift 2 ;;
    --python) python="${2:-}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "train-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $kernels =~ ^(cpu|cuda|mixed)(,(cpu|cuda|mixed))*$ ]] || { echo "train-check: --kernels '$kernels': expected cpu, cuda and/or mixed, comma-separated" >&2; exit 2; }
[[ $tolerance =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "train-check: --tolerance '$tolerance': expected points, e.g. 0.5" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
results="$out/results.jsonl"; : >"$results"
say() { echo "train-check: $*" >&2; }

# The bundle's layout (bin/, python/ sources, examples/, share/) or a build tree's.
if [[ -x "$here/bin/sketchps" ]]; then
  front="$here/bin/sketchps"; examples="$here/examples/pytorch"; bundled_data="$here/share/fashion-mnist"
  prefix="$here"; sources="$here/python"
else
  root=$(cd "$here/.." && pwd)
  front="$root/build/ci/tools/sketchps"; examples="$root/examples/pytorch"; bundled_data=""
  prefix=""; sources=""
fi
[[ -x $front ]] || { say "no sketchps front end at $front (build it, or run from the bundle)"; exit 2; }
if [[ -z $data ]]; then
  for d in /usr/share/datasets/fashion-mnist "$bundled_data"; do
    [[ -n $d && -f $d/train-images-idx3-ubyte.gz ]] && { data=$d; break; }
  done
fi
[[ -n $data && -f $data/train-images-idx3-ubyte.gz ]] || {
  say "no Fashion-MNIST (--data, /usr/share/datasets/fashion-mnist or the bundle's share/fashion-mnist)"; exit 2; }
[[ -n $python ]] || python=$(command -v python3) || { say "no python3 on PATH (or --python)"; exit 2; }
"$python" -c "import torch" 2>/dev/null || { say "$python has no torch (--python names one that has)"; exit 2; }

# The package: pip builds sketchps._core against the bundle (SKETCHPS_PREFIX) for this python3 and torch.
if [[ -n $sources ]]; then
  rm -rf "$out/pkg" "$out/pkg-src" && cp -r "$sources" "$out/pkg-src"
  t0=$(date +%s)
  "$python" -c "import importlib, sys
def version(name):
    try:
        return importlib.import_module(name).__version__
    except Exception as e:
        return f'missing ({e})'
print('python', sys.version.split()[0], 'torch', version('torch'), 'pybind11', version('pybind11'))" \
    >"$out/versions.txt" 2>&1
  if ! SKETCHPS_PREFIX="$prefix" "$python" -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir \
      --disable-pip-version-check --target "$out/pkg" "$out/pkg-src" >"$out/pip.txt" 2>&1; then
    say "pip install of the package failed (the end of $out/pip.txt):"; tail -15 "$out/pip.txt" >&2
    echo "{\"check\":\"pip\",\"exit\":1}" >>"$results"; exit 1
  fi
  echo "{\"check\":\"pip\",\"exit\":0,\"seconds\":$(( $(date +%s) - t0 ))}" >>"$results"
  export PYTHONPATH="$out/pkg${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$root/build/ci/python${PYTHONPATH:+:$PYTHONPATH}"  # what `sketchps run` puts first there
fi
say "package: $("$python" -c 'import torch, sketchps._core as c; print(f"torch {torch.__version__} (CUDA {torch.version.cuda}); sketchps._core from {c.__file__}")' 2>&1 | tail -1)"

# --kernels mixed: every process of the job runs this interpreter, which gives ranks 0 and 1 the CUDA
# kernels and the others the CPU ones (the describe pass, without a RANK, the CUDA ones).
mixed_python="$out/python-mixed.sh"
printf '%s\n' '#!/usr/bin/env bash' \
  'if [[ ${RANK:-0} -lt 2 ]]; then export SKETCHPS_KERNELS=cuda; else export SKETCHPS_KERNELS=cpu; fi' \
  "exec \"$python\" \"\$@\"" >"$mixed_python"
chmod +x "$mixed_python"
# What a rank of the example prints when it runs on the kernels that job `k` gives it.
on_device() {
  case $1 in
    mixed) echo "^rank [01]: cuda kernels, model on cuda|^rank [2-9]: cpu kernels, model on cpu" ;;
    *) echo "^rank [0-9]*: $1 kernels, model on $1" ;;
  esac
}

# The front end and the servers run on the CPU kernels, as on CPU server nodes: a lib/cuda folder on
# LD_LIBRARY_PATH (gpu-check.sh puts one there) is dropped. Each rank loads the kernels its job gives
# it by path (SKETCHPS_KERNELS, sketchps/_kernels.py).
LD_LIBRARY_PATH=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v '/lib/cuda/*$' | paste -sd: -)
export LD_LIBRARY_PATH
# "k against cpu", once both accuracies are known (right after the later job, so a cut keeps it).
declare -A compared=()
compare_with_cpu() {
  local k verdict diff within
  for k in cuda mixed; do
    [[ -n ${accuracy[$k]:-} && -n ${accuracy[cpu]:-} && -z ${compared[$k]:-} ]] || continue
    compared[$k]=1
    verdict=$("$python" -c "import sys; a, b, t = map(float, sys.argv[1:]); d = abs(a - b) * 100; print(f'{d:.2f}', int(d <= t))" \
              "${accuracy[$k]}" "${accuracy[cpu]}" "$tolerance")
    diff=${verdict% *}; within=${verdict#* }
    say "$k against cpu: $diff points apart (tolerance $tolerance): $([[ $within -eq 1 ]] && echo within || echo OUTSIDE)"
    echo "{\"check\":\"train_compare\",\"kernels\":\"$k\",\"points_apart\":$diff,\"tolerance\":$tolerance,\"within\":$([[ $within -eq 1 ]] && echo true || echo false)}" >>"$results"
    [[ $within -eq 1 ]] || status=1
  done
}

samples=30000; epochs=2
[[ $quick -eq 1 ]] && { samples=8000; epochs=1; }
status=0
declare -A accuracy=()
for k in ${kernels//,/ }; do
  run="$out/train-$k"
  rm -rf "$run"
  t0=$(date +%s)
  py=$python; [[ $k == mixed ]] && py=$mixed_python
  SKETCHPS_KERNELS=${k/mixed/auto} "$front" run --job "$examples/fashion_mnist.yaml" \
    --script "$examples/fashion_mnist.py" --python "$py" --out "$run" --no-plot --no-progress \
    --set "data.path=$data" --set "data.train_samples=$samples" --set "train.epochs=$epochs" \
    -- --save "$out/model-$k.pt" >"$out/train-$k.txt" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - t0 ))
  # Every rank says which kernels it loaded and where its model is (the example prints it).
  ranks_on=$(cat "$run"/worker-*.log 2>/dev/null | grep -cE "$(on_device "$k")")
  acc=$("$python" -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1])).get('final_test_accuracy')))" \
        "$run/summary.json" 2>/dev/null || echo null)
  say "$k kernels: exit $rc in $seconds s, $ranks_on of 4 ranks on $k, final accuracy $acc"
  echo "{\"check\":\"train\",\"kernels\":\"$k\",\"exit\":$rc,\"seconds\":$seconds,\"ranks_on_device\":$ranks_on,\"accuracy\":$acc,\"samples\":$samples,\"epochs\":$epochs}" >>"$results"
  if [[ $rc -ne 0 || $ranks_on -ne 4 || $acc == null ]]; then
    status=1; tail -20 "$out/train-$k.txt" >&2
  else
    accuracy[$k]=$acc
  fi
  compare_with_cpu
done
# Decentralized peers on mixed backends must be refused at the start: nothing compares their replicas
# after a round (docs/gpu.md), so the job fingerprint carries the backend.
if [[ ,$kernels, == *,mixed,* ]]; then
  run="$out/train-mixed-decentralized"
  rm -rf "$run"
  timeout --foreground -k 10 120 "$front" run --job "$examples/fashion_mnist.yaml" --mode decentralized --set peer.on_failure=stop \
    --script "$examples/fashion_mnist.py" --python "$mixed_python" --out "$run" --no-plot --no-progress \
    --set "data.path=$data" --set data.train_samples=1024 --set train.epochs=1 >"$out/train-mixed-decentralized.txt" 2>&1
  rc=$?
  refused=false
  [[ $rc -ne 0 ]] && cat "$out/train-mixed-decentralized.txt" "$run"/*.log 2>/dev/null |
    grep -q "decentralized peers must share one backend" && refused=true
  say "mixed kernels, decentralized: exit $rc, $([[ $refused == true ]] && echo "refused, as it must be" || echo "NOT refused")"
  echo "{\"check\":\"mixed_decentralized\",\"exit\":$rc,\"refused\":$refused}" >>"$results"
  [[ $refused == true ]] || status=1
fi

exit $status
