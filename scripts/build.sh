#!/usr/bin/env bash
# Configures and builds one CMake preset (default: ci, the CPU backend). Usage: scripts/build.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-ci}"
bash scripts/setup.sh
echo "build: configuring preset '$preset'"
cmake --preset "$preset" >/dev/null
echo "build: compiling preset '$preset' (first build takes a few minutes on 2 cores)"
cmake --build --preset "$preset"
