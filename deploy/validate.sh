#!/usr/bin/env bash
# Offline validation of everything under deploy/ (no cluster, no Docker engine):
#   1. kustomize renders each overlay in k8s/overlays/ (kubectl's built-in kustomize v5);
#   2. every rendered object against Kubernetes' schemas, strictly (validate/k8s.mjs);
#   3. every compose file against the compose-spec schema (validate/compose.mjs);
#   4. the Dockerfiles through a linter and the project's rules (validate/dockerfile.mjs);
#   5. the deployment rules of RELIABILITY.md 8.8 (as the daemons now work: mutual TLS, shards that
#      end with the job) and the agreement of S and P everywhere they appear (validate/policy.py; it
#      runs the containers' commands with stand-ins for the daemons, validate/podsim.py).
# Every step runs even if an earlier one failed; exit 1 if any failed, 0 if all passed, 2 on a
# setup problem. Usage: deploy/validate.sh [--deploy-dir DIR]  (DIR: the deploy/ tree to check,
# default this script's folder; tests/deploy validates mutated copies this way).
# Installs what it needs: Node.js and npm from Debian if missing, the validators pinned by
# package-lock.json with `npm ci` into deploy/node_modules (once per lock file), python3-yaml.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target=$here
while [[ $# -gt 0 ]]; do
  case $1 in
    --deploy-dir) target=$(cd "$2" && pwd); shift 2 ;;
    *) echo "usage: $0 [--deploy-dir DIR]" >&2; exit 2 ;;
  esac
done

log() { echo "validate: $*"; }
apt_install() {
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  log "installing Debian packages: $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
PYTHON=/usr/bin/python3
[[ -x $PYTHON ]] || PYTHON=$(command -v python3)
"$PYTHON" -c 'import yaml' 2>/dev/null || { apt_install python3-yaml; PYTHON=/usr/bin/python3; }

# One installer at a time (ctest may run two validations at once).
exec 9>"$here/.npm-install.lock"
flock 9
stamp=$here/node_modules/.sketchps-lock.sha256
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  log "npm ci (validators pinned by deploy/package-lock.json)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
fi
flock -u 9
kubectl=$(bash "$here/validate/kubectl.sh") || { log "no kustomize available"; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
step() {  # step NAME COMMAND...: runs one check, records a failure without stopping
  local name=$1; shift
  log "$name"
  if ! "$@"; then failed+=("$name"); fi
}

rendered=()
render() {
  local overlay
  for overlay in "$target"/k8s/overlays/*/; do
    local name out
    name=$(basename "$overlay")
    out=$work/$name.yaml
    if "$kubectl" kustomize "$overlay" > "$out" 2> "$work/$name.err"; then
      grep -v 'Warning: ' "$work/$name.err" >&2 || true
      echo "kustomize: overlay $name: $(grep -c '^kind:' "$out") objects"
      rendered+=("$out")
    else
      cat "$work/$name.err" >&2
      echo "kustomize: overlay $name does not build"
      return 1
    fi
  done
  [[ ${#rendered[@]} -gt 0 ]] || { echo "kustomize: no overlays under $target/k8s/overlays"; return 1; }
}

step "kustomize build (overlays: $(ls "$target/k8s/overlays" | tr '\n' ' '))" render
if [[ ${#rendered[@]} -gt 0 ]]; then
  step "Kubernetes objects: schema and unknown fields" node "$here/validate/k8s.mjs" "${rendered[@]}"
fi
step "compose files: compose-spec schema" node "$here/validate/compose.mjs" "$target"/compose/*.yml
step "Dockerfiles: lint and rules" node "$here/validate/dockerfile.mjs" --context "$target/.." "$target"/docker/Dockerfile.*
policy_args=(--compose "$target/compose/docker-compose.yml")
for f in "${rendered[@]}"; do policy_args+=(--k8s "$f"); done
step "deployment rules (RELIABILITY.md 8.8) and consistency" "$PYTHON" "$here/validate/policy.py" "${policy_args[@]}"

if [[ ${#failed[@]} -gt 0 ]]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi
log "all checks passed"
