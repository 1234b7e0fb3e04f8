#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs `sketchps bench` on the default sizes.
# Extra arguments go to `sketchps bench` (see `build/ci/tools/sketchps bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh ci
exec build/ci/tools/sketchps bench "$@"
