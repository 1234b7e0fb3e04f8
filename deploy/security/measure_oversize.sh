#!/usr/bin/env bash
# How much memory a server holds for pushes above its message limit (docs/security.md, "Resource
# limits"). Starts oversize_probe's server (or, with SERVER_CMD, any command that writes its gRPC
# port to $PORT_FILE as a number or as a sketchps port file), pushes oversize bodies with
# oversize_probe, and prints the server's VmHWM and VmRSS (kB) before and after.
#
#   deploy/security/measure_oversize.sh [server flags for oversize_probe serve]...
#   CASES="64M:1:1 128M:4:1 128M:4:4" ...   bytes:calls:connections per case (default as shown)
#
# Each case runs against a fresh server. Runs under nice -n 19; binds 127.0.0.1:0 only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
probe="$work/oversize_probe"
# shellcheck disable=SC2046
nice -n 19 g++ -std=c++20 -O1 "$here/oversize_probe.cc" $(pkg-config --cflags --libs grpc++) -o "$probe"

bytes_of() {
  local v=$1
  case "$v" in
    *M) echo $((${v%M} << 20)) ;;
    *K) echo $((${v%K} << 10)) ;;
    *) echo "$v" ;;
  esac
}
kb() { awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }

for case in ${CASES:-64M:1:1 128M:4:1 128M:4:4}; do
  IFS=: read -r size calls conns <<<"$case"
  port_file="$work/port"
  rm -f "$port_file"
  if [[ -n "${SERVER_CMD:-}" ]]; then
    PORT_FILE=$port_file nice -n 19 bash -c "$SERVER_CMD" >"$work/server.log" 2>&1 &
  else
    nice -n 19 "$probe" serve --port-file "$port_file" "$@" >"$work/server.log" 2>&1 &
  fi
  pid=$!
  for _ in $(seq 600); do [[ -s "$port_file" ]] && break; sleep 0.1; done
  port=$(grep -o '[0-9]\+' "$port_file" | head -1)
  [[ -n "${SERVER_CMD:-}" ]] && port=$(sed -n 's/.*"grpc": *\([0-9]*\).*/\1/p' "$port_file")
  sleep 0.5
  hwm0=$(kb "$pid" VmHWM)
  rss0=$(kb "$pid" VmRSS)
  out=$(nice -n 19 "$probe" push --target "127.0.0.1:$port" --bytes "$(bytes_of "$size")" --calls "$calls" \
    --connections "$conns" 2>&1)
  sleep 1
  hwm1=$(kb "$pid" VmHWM)
  rss1=$(kb "$pid" VmRSS)
  codes=$(echo "$out" | sed -n 's/^call [0-9]*: code \([0-9]*\).*/\1/p' | sort | uniq -c | tr -s ' ' | tr '\n' ',')
  elapsed=$(echo "$out" | sed -n 's/^elapsed //p')
  echo "case $size x$calls on $conns conn: peak +$(((hwm1 - hwm0) / 1024)) MiB (VmHWM $((hwm1 / 1024)) MiB)," \
    "resident after +$(((rss1 - rss0) / 1024)) MiB; codes [$codes] in $elapsed; flags: ${SERVER_CMD:-$*}"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
