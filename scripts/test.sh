#!/usr/bin/env bash
# Installs what is missing, builds the `ci` preset and runs one lane of the tests (CMakePresets.json,
# tests/CMakeLists.txt). Exit status is ctest's.
#   bash scripts/test.sh           the CI lane: every test but the long lane (what CI runs)
#   bash scripts/test.sh --fast    unit tests and fuzz replays only (a few minutes; your own loop)
#   bash scripts/test.sh --long    the long lane: every method's accuracy run, the full Python and
#                                  convergence suites, the chaos cases beyond CI's subset
#   bash scripts/test.sh --all     every test (both lanes)
set -euo pipefail
cd "$(dirname "$0")/.."
lane=ci
case "${1:-}" in
  "") ;;
  --fast) lane=fast ;;
  --long) lane=long ;;
  --all) lane=all ;;
  -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
  *) echo "test: unknown option $1 (--fast, --long or --all; see --help)" >&2; exit 2 ;;
esac
bash scripts/build.sh ci
echo "test: running the '$lane' lane"
start=$(date +%s)
status=0
ctest --preset "$lane" -j 2 || status=$?
echo "test: the '$lane' lane took $(( $(date +%s) - start )) s"
exit $status
