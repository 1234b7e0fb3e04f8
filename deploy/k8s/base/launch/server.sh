#!/bin/sh
# Entrypoint of a shard's container in the server Job (mounted from the ConfigMap sketchps-launch):
# runs `sketchps-server "$@"` and exits with its exit code, with one exception.
#
# The shard exits 0 in two cases: every worker has left (the job is over), or it was sent SIGTERM
# and drained (finished the phase in flight, wrote a checkpoint). In an Indexed Job the second one
# would complete the shard's index for good when Kubernetes stops the pod (eviction, preemption,
# node drain, pod deletion): the Job would not replace it and the workers would wait for it in
# vain. So when this script has passed a SIGTERM or SIGINT on to the shard and the shard then exits
# 0, the script exits 143 (128 + SIGTERM): the pod fails and the Job recreates the index (its
# podFailurePolicy ignores DisruptionTarget failures, other ones count towards backoffLimit).
set -u
stopped=""
pid=""
# Installed before the shard starts: as PID 1 this shell would otherwise ignore SIGTERM.
trap 'stopped=1; [ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null' TERM INT
sketchps-server "$@" &
pid=$!
[ -z "$stopped" ] || kill -TERM "$pid" 2>/dev/null
while :; do
  wait "$pid"
  rc=$?
  # `wait` also returns (with 128 + the signal) when a trapped signal arrives; the shard is then
  # still draining (or not yet reaped): wait again for its own exit code.
  if [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
    continue
  fi
  break
done
if [ -n "$stopped" ] && [ "$rc" -eq 0 ]; then
  echo "server.sh: the shard drained after a termination signal; exiting 143 so that the Job recreates its index" >&2
  rc=143
fi
exit "$rc"
