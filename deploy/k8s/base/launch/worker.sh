#!/bin/sh
# Entrypoint of a worker's container in the worker Job (mounted from the ConfigMap sketchps-launch):
# sets SKETCHPS_SERVERS to the stable names of the S shards, in shard order, and runs
# `sketchps-worker "$@"`. S is SKETCHPS_SERVER_COUNT (set from the one setting `sketchps-scale` by
# the component components/scale); shard s is pod <SKETCHPS_SERVER_JOB>-<s> of the server Job,
# named through the headless Service of the same name, on port SKETCHPS_SERVER_PORT:
#   sketchps-server-0.sketchps-server:7070,sketchps-server-1.sketchps-server:7070,...
set -eu
: "${SKETCHPS_SERVER_COUNT:?is not set (the number of shards)}"
job=${SKETCHPS_SERVER_JOB:-sketchps-server}
port=${SKETCHPS_SERVER_PORT:-7070}
case $SKETCHPS_SERVER_COUNT in
  '' | *[!0-9]*) echo "worker.sh: SKETCHPS_SERVER_COUNT '$SKETCHPS_SERVER_COUNT' is not a number" >&2; exit 2 ;;
esac
servers=""
s=0
while [ "$s" -lt "$SKETCHPS_SERVER_COUNT" ]; do
  servers="$servers${servers:+,}$job-$s.$job:$port"
  s=$((s + 1))
done
SKETCHPS_SERVERS=$servers
export SKETCHPS_SERVERS
exec sketchps-worker "$@"
