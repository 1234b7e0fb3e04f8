#!/usr/bin/env bash
# The chaos suite: small jobs on emulated hosts (network namespaces), one fault per case, each judged
# PASS/FAIL against what the documentation says (docs/reliability.md). All arguments go to
# chaos_run.py, e.g.
#   sudo bash deploy/chaos/run.sh --bin-dir /path/to/a/copy/of/build/ci --out runs/chaos --write-doc docs/reliability.md
#   sudo bash deploy/chaos/run.sh --bin-dir DIR --short            # the CI subset (under 3 minutes)
#   sudo bash deploy/chaos/run.sh --bin-dir DIR --cases 'ps-partition-*,dec-loss-1pct'
#   bash deploy/chaos/run.sh --list                                # the cases
# Needs root. Installs iproute2, nftables and python3-yaml from Debian if they are missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for a in "$@"; do
  case $a in --list|--render-only|-h|--help) exec /usr/bin/python3 "$here/chaos_run.py" "$@" ;; esac
done
if [[ $(id -u) -ne 0 ]]; then
  echo "chaos: FAILED: must run as root (network namespaces, tmpfs mounts); not skipping" >&2
  exit 1
fi
missing=()
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
command -v nft >/dev/null || missing+=(nftables)
/usr/bin/python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "chaos: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
exec /usr/bin/python3 "$here/chaos_run.py" "$@"
