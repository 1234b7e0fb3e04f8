#!/usr/bin/env bash
# End-to-end benchmark, sketchps against PyTorch DDP on emulated hosts: checks root and the
# packages, then runs run.py with /usr/bin/python3 (Debian's, which has python3-torch). All
# arguments go to run.py (see its header and bench/e2e/README.md), e.g.
#   sudo bash bench/e2e/run.sh --bin-dir build/ci --bandwidth 100mbit --bandwidth none --out runs/e2e
# Exit 2 (with the missing package named) when something is missing: bash scripts/setup.sh installs it.
set -euo pipefail
trap 'echo "e2e: FAILED: interrupted by signal 15 (before any run started)" >&2; exit 1' TERM
trap 'echo "e2e: FAILED: interrupted by signal 2 (before any run started)" >&2; exit 1' INT
here=$(cd "$(dirname "$0")" && pwd)
dry_run=0
for a in "$@"; do [[ $a == --dry-run ]] && dry_run=1; done
if [[ $(id -u) -ne 0 && $dry_run -eq 0 ]]; then
  echo "e2e: must run as root (network namespaces); not skipping" >&2
  exit 2
fi
missing=()
command -v ip >/dev/null && command -v tc >/dev/null || missing+=(iproute2)
[[ -x /usr/bin/python3 ]] || missing+=(python3)
for mod in torch:python3-torch matplotlib:python3-matplotlib yaml:python3-yaml numpy:python3-numpy; do
  /usr/bin/python3 -c "import ${mod%%:*}" 2>/dev/null || missing+=("${mod#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "e2e: missing Debian packages: ${missing[*]} (install them: bash scripts/setup.sh)" >&2
  exit 2
fi
exec /usr/bin/python3 "$here/run.py" "$@"
