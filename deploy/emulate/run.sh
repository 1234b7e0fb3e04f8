#!/usr/bin/env bash
# Emulated multi-host run of deploy/compose/docker-compose.yml: one network namespace per service,
# the daemons from a build folder. All arguments go to netns_run.py (see its header), e.g.
#   sudo deploy/emulate/run.sh --build-dir build/ci --set model=mlp --set train.rounds=20 --bandwidth 100mbit
# Needs root. Installs iproute2 and python3-yaml from Debian if they are missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) -ne 0 ]]; then
  echo "emulate: FAILED: must run as root (network namespaces); not skipping" >&2
  exit 1
fi
missing=()
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
/usr/bin/python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "emulate: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
exec /usr/bin/python3 "$here/netns_run.py" "$@"
