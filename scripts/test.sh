#!/usr/bin/env bash
# Installs what is missing, builds the CPU backend and runs every test. Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh ci
echo "test: running the test suites"
ctest --preset ci -j 2
