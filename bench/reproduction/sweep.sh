#!/usr/bin/env bash
# The measurements of docs/reports/reproduction.md: gs-SGD against gTop-k (PS and tree) and Sketched-SGD,
# both modes, one `sketchps loadgen` invocation per (network, d), so that every ratio is taken
# between configurations of one invocation. Run as root (network namespaces, prefix seedc).
#
#   bash bench/reproduction/sweep.sh BIN_DIR [PART...]   # PART: loopback latency bandwidth big vgg
#
# BIN_DIR holds sketchps, sketchps-bench and sketchps-server (--params needs this branch's loadgen).
# Results: bench/reproduction/<network>-<d>.json (+ .log); the tables: bench/reproduction/table.py.
# An invocation whose JSON exists is skipped (delete it to rerun).
set -euo pipefail
BIN=${1:?usage: sweep.sh BIN_DIR [PART...]}; shift
PARTS=${*:-loopback latency bandwidth big}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$HERE
SCHEMES=gs_sgd,gtopk,sketched_sgd,gtopk_tree
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# run NAME NETEM_ARGS -- LOADGEN_ARGS: one invocation, skipped when its JSON exists.
run() {
  local name=$1; shift
  local netem=()
  while [[ $1 != -- ]]; do netem+=("$1"); shift; done; shift
  [[ -s $OUT/$name.json ]] && { echo "== $name: kept"; return; }
  echo "== $name: $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/python3 "$HERE/netem.py" --name "seedc-$name" "${netem[@]}" -- \
    "$BIN/sketchps" loadgen --mode ps,decentralized --schemes $SCHEMES --bin-dir "$BIN" \
    --timeout-seconds 600 --out "$OUT/$name.json" "$@" 2> "$OUT/$name.log" || echo "   (exit $?)"
  tail -n 15 "$OUT/$name.log" | grep -v '^loadgen:' || true
}

for part in $PARTS; do case $part in
  loopback)
    run loopback-cnn -- --model cnn --workers 4,8,16,32 --warmup-rounds 2 --rounds 3
    run loopback-resnet -- --model resnet --workers 4,8,16,32 --warmup-rounds 2 --rounds 3 ;;
  vgg)  # P = 32 at this d overloaded the 2 cores (aborted-loopback-vgg-p32.json)
    run loopback-vgg -- --model vgg --workers 4,8 --warmup-rounds 1 --rounds 3 ;;
  latency)  # 7 timed rounds and P <= 8: single rounds stalled for seconds at P = 16 on the loaded machine
    run latency-0ms-resnet -- --model resnet --workers 4,8 --warmup-rounds 2 --rounds 7
    for ms in 1 5 20; do
      run latency-${ms}ms-resnet --delay-ms $ms -- --model resnet --workers 4,8 --warmup-rounds 2 --rounds 7
    done ;;
  bandwidth)
    run bandwidth-1gbit-resnet --rate 1gbit -- --model resnet --workers 4,16 --warmup-rounds 1 --rounds 2
    run bandwidth-100mbit-resnet --rate 100mbit -- --model resnet --workers 4,16 --warmup-rounds 1 --rounds 2
    run bandwidth-1gbit-5ms-resnet --rate 1gbit --delay-ms 5 -- --model resnet --workers 4,16 --warmup-rounds 1 --rounds 2 ;;
  big)
    run loopback-flat25m -- --params 25000000 --workers 4,8 --warmup-rounds 1 --rounds 3
    run latency-20ms-flat25m --delay-ms 20 -- --params 25000000 --workers 4 --warmup-rounds 1 --rounds 3 ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac; done
