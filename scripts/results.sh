#!/usr/bin/env bash
# Regenerates docs/results.md's fidelity table and accuracy/compression curves from scratch:
#
#   bash scripts/results.sh [table|sweep|all] [--out DIR] [--set k=v]...     (default: all, runs/results)
#
#   table  every method at its paper's compression regime on the CNN for 3 epochs, dense at the same
#          epochs as the reference; gs-SGD, Sketched-SGD and dense on the 1.2M-parameter ResNet for one
#          epoch, with top-k at the same density for comparison. Writes DIR/fidelity.md
#          (bench/fidelity/report.py table).
#   sweep  every method at densities 0.1, 0.01, 0.003 and 0.001 on the CNN for one epoch, dense once.
#          Writes DIR/sweep.md and DIR/sweep-uplink.{png,svg}, DIR/sweep-downlink.{png,svg}.
#
# Each run is `sketchps run` on the embedded default job (Fashion-MNIST, 4 workers, 2 servers on this
# machine, batch 32, lr 0.05, momentum 0.9) with the overrides below, in DIR/<part>/<run>-<density>. A
# run whose summary.json exists is kept, so an interrupted regeneration resumes; delete DIR for a fresh
# one. The reports read the summary.json files of this script's runs only (not other directories in
# DIR). A run that fails is reported, left out, and makes the script exit 1 after the reports.
# About 50 minutes on 2 quiet cores; not in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

part=all
out=runs/results
extra=()
while (($#)); do
  case "$1" in
    table | sweep | all) part=$1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --set) extra+=(--set "${2:?--set needs key=value}"); shift ;;
    *) echo "results.sh: unknown argument '$1' (usage: results.sh [table|sweep|all] [--out DIR] [--set k=v]...)" >&2
       exit 2 ;;
  esac
  shift
done

bash scripts/build.sh ci >&2
sketchps=build/ci/tools/sketchps
python=/usr/bin/python3

total=0
done_runs=0
ran=()     # the run directories of this invocation, for the report
failed=()  # runs that ended without a summary.json: reported at the end, left out of the reports
# run DIR NAME OVERRIDE...: one `sketchps run` unless DIR/NAME/summary.json exists.
run() {
  local dir=$1 name=$2
  shift 2
  done_runs=$((done_runs + 1))
  ran+=("$dir/$name")
  if [[ -f "$dir/$name/summary.json" ]]; then
    echo "results: [$done_runs/$total] $name: kept (summary.json exists)" >&2
    return
  fi
  echo "results: [$done_runs/$total] $name: $*" >&2
  rm -rf "${dir:?}/$name"
  "$sketchps" run --out "$dir/$name" --no-progress --no-plot --set job_id="results-$name" "$@" "${extra[@]}" \
    >"$dir/$name.log" 2>&1 || {
    echo "results: $name failed; see $dir/$name.log" >&2
    tail -3 "$dir/$name.log" >&2
    failed+=("$name")
    unset 'ran[-1]'
    return
  }
  grep -m1 "^run: done" "$dir/$name.log" >&2 || true
}

# The paper regimes (issue 15): top-k family >= 100x uplink, DGC >= 270x, SDAGC >= 400x (both past
# their warm-ups), the sketches >= 10x on the CNN and >= 50x on the ResNet. Densities chosen from
# their bytes per entry (docs/results.md, "Choosing the densities").
cnn_table=(
  "dense 1"
  "topk 0.0065"
  "dgc 0.0007"
  "gtopk 0.0065"
  "sketched_sgd 0.0075"
  "gs_sgd 0.005"
  "fetchsgd 0.01"
  "sdagc 0.0009"
  "sidco 0.006"
  "scalecom 0.0085"
)
resnet_table=("dense 1" "topk 0.001" "sketched_sgd 0.001" "gs_sgd 0.001")
sweep_schemes=(topk dgc gtopk sketched_sgd gs_sgd fetchsgd sdagc sidco scalecom)
sweep_densities=(0.1 0.01 0.003 0.001)

table() {
  local dir=$out/table
  mkdir -p "$dir"
  ran=()
  for entry in "${cnn_table[@]}"; do
    read -r scheme density <<<"$entry"
    run "$dir" "cnn-$scheme-$density" --set scheme.name="$scheme" --set scheme.density="$density" --set train.epochs=3 \
      --set train.eval_every_rounds=468
  done
  for entry in "${resnet_table[@]}"; do
    read -r scheme density <<<"$entry"
    run "$dir" "resnet-$scheme-$density" --set model=resnet --set scheme.name="$scheme" --set scheme.density="$density" \
      --set train.eval_every_rounds=234
  done
  "$python" bench/fidelity/report.py table "${ran[@]}" --out "$out/fidelity"
}

sweep() {
  local dir=$out/sweep
  mkdir -p "$dir"
  ran=()
  run "$dir" "dense" --set scheme.name=dense --set scheme.density=1
  for scheme in "${sweep_schemes[@]}"; do
    for density in "${sweep_densities[@]}"; do
      run "$dir" "$scheme-$density" --set scheme.name="$scheme" --set scheme.density="$density"
    done
  done
  "$python" bench/fidelity/report.py sweep "${ran[@]}" --out "$out/sweep"
}

case "$part" in
  table) total=$((${#cnn_table[@]} + ${#resnet_table[@]})); table ;;
  sweep) total=$((1 + ${#sweep_schemes[@]} * ${#sweep_densities[@]})); sweep ;;
  all)
    total=$((${#cnn_table[@]} + ${#resnet_table[@]} + 1 + ${#sweep_schemes[@]} * ${#sweep_densities[@]}))
    table
    sweep
    ;;
esac
if ((${#failed[@]})); then
  echo "results: ${#failed[@]} run(s) failed and are missing from the reports: ${failed[*]}" >&2
  exit 1
fi
echo "results: done; tables and figures in $out" >&2
