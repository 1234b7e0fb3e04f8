#!/usr/bin/env bash
# Fuzzing and sanitized tests (clang-14: libFuzzer, ASan, UBSan; the `fuzz` CMake preset).
#
#   bash scripts/fuzz.sh                     # every harness for 30 s
#   bash scripts/fuzz.sh --seconds 600 push  # one harness, longer
#   bash scripts/fuzz.sh --tests             # also build and run the library test suites under ASan+UBSan
#   bash scripts/fuzz.sh --tests --seconds 0 # only the sanitized test suites
#
# Each harness (tests/fuzz/<name>_fuzz.cc) starts from its committed corpus (tests/fuzz/corpus/<name>/,
# never written to); inputs it finds go to runs/fuzz/<name>/corpus and any crash reproducer to
# runs/fuzz/<name>/ (crash-*, leak-*, timeout-*, oom-*). Replay one with
#   build/fuzz/tests/fuzz/sketchps_fuzz_<name> runs/fuzz/<name>/crash-...
# and add it to the committed corpus once fixed (as bad-<what>), so every test run replays it.
# Exit status: 0 when no harness crashed and every sanitized test passed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=30
tests=0
harnesses=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "fuzz: --seconds needs a whole number of seconds" >&2; exit 2; }
               seconds="$2"; shift 2 ;;
    --tests) tests=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
if [[ ${#harnesses[@]} -eq 0 ]]; then
  harnesses=(payload push join checkpoint gradient_dump letter regroup job_spec)
fi
for h in "${harnesses[@]}"; do
  [[ -d tests/fuzz/corpus/$h ]] || { echo "fuzz: no harness '$h' (tests/fuzz/corpus/$h is missing)" >&2; exit 2; }
done

bash scripts/setup.sh
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/fuzz/ubsan.supp"
jobs=$(nproc)
echo "fuzz: configuring and building the fuzz preset (clang-14, ASan+UBSan, libFuzzer)"
cmake --preset fuzz >/dev/null
targets=(sketchps_fuzzers)
if [[ $tests -eq 1 ]]; then
  targets+=(sketchps_common_tests sketchps_kernels_tests sketchps_engine_tests sketchps_schemes_tests
            sketchps_job_tests sketchps_ps_tests sketchps_peer_tests)
fi
cmake --build --preset fuzz -j "$jobs" --target "${targets[@]}"

failed=()
if [[ $tests -eq 1 ]]; then
  echo "fuzz: library test suites under ASan+UBSan"
  if ! ctest --preset fuzz -j "$jobs" -R '^(common|kernels|engine|schemes|job|server|peer)/' -E 'reaches 80'; then
    failed+=("sanitized tests")
  fi
fi

if [[ $seconds -eq 0 ]]; then
  harnesses=()  # --seconds 0: no fuzzing (libFuzzer would read 0 as "no limit")
fi
for h in "${harnesses[@]}"; do
  out="runs/fuzz/$h"
  mkdir -p "$out/corpus"
  echo "fuzz: $h for ${seconds} s"
  if ! "build/fuzz/tests/fuzz/sketchps_fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" "tests/fuzz/corpus/$h" >"$out/log.txt" 2>&1; then
    echo "fuzz: $h FAILED; reproducer and log in $out/" >&2
    grep -E "ERROR|invariant broken|SUMMARY" "$out/log.txt" | head -5 >&2 || true
    failed+=("$h")
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/log.txt" | tr '\n' ' ' | sed "s/^/fuzz: $h: /"; echo
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#harnesses[@]} harnesses, no crash"
