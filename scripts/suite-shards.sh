#!/usr/bin/env bash
# Runs one Catch2 unit suite as SHARDS processes side by side, each a round-robin share of the test
# cases that SPEC selects, and prints one summary line. For the GPU acceptance run (gpu-check.sh):
# the suites' convergence simulations are thousands of tiny rounds, each kernel call a launch and a
# synchronization that leave the GPU idle, so several processes share one GPU well.
#
#   suite-shards.sh EXE SHARDS SECONDS OUTPUT [SPEC]
#
# The names come from EXE SPEC --list-test-names-only, with Catch2's special characters (\ , [ ])
# escaped, and go to each shard with -f. SHARDS 1 runs EXE SPEC as it is. Each process has SECONDS.
# OUTPUT gets every shard's output (--durations yes), shard after shard. The last line on stdout:
#   "<n> test cases in <s> shards: <p> passed, <f> failed[, <u> not run (shard <i> exit <rc>, ...)]"
# Exit status: 0 when every shard passed; otherwise the first failing shard's status (124: cut off);
# 2 for bad arguments; 1 when SPEC selects no test case.
set -uo pipefail
usage() { echo "suite-shards: $1 (usage: suite-shards.sh EXE SHARDS SECONDS OUTPUT [SPEC])" >&2; exit 2; }
[[ $# -ge 4 && $# -le 5 ]] || usage "expected 4 or 5 arguments, got $#"
exe=$1; shards=$2; seconds=$3; output=$4; spec=${5:-}
[[ -x $exe ]] || usage "EXE '$exe' is not an executable file"
[[ $shards =~ ^[1-9][0-9]*$ ]] || usage "SHARDS '$shards' is not a positive whole number"
[[ $seconds =~ ^[1-9][0-9]*$ ]] || usage "SECONDS '$seconds' is not a positive whole number"

work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
spec_args=(); [[ -n $spec ]] && spec_args=("$spec")

# The shards' name files: line i of the listing goes to shard i mod SHARDS.
# (Catch2's exit status after a listing is the number of names, so only stderr tells of a failure.)
"$exe" "${spec_args[@]}" --list-test-names-only >"$work/names.txt" 2>"$work/list-error.txt"
[[ -s $work/list-error.txt ]] && { echo "suite-shards: $exe cannot list its test cases: $(head -3 "$work/list-error.txt")" >&2; exit 2; }
sed -i -e '/^$/d' "$work/names.txt"
cases=$(wc -l <"$work/names.txt")
(( cases > 0 )) || { echo "0 test cases in 0 shards: SPEC '$spec' selects none"; exit 1; }
(( shards > cases )) && shards=$cases
sed -e 's/\\/\\\\/g' -e 's/,/\\,/g' -e 's/\[/\\[/g' -e 's/\]/\\]/g' "$work/names.txt" \
  | awk -v n="$shards" -v dir="$work" '{ print > (dir "/shard-" ((NR - 1) % n) ".txt") }'

pids=()
: >"$output"
for ((i = 0; i < shards; i++)); do
  if (( shards == 1 )); then selection=("${spec_args[@]}"); else selection=(-f "$work/shard-$i.txt"); fi
  timeout -k 10 "$seconds" "$exe" "${selection[@]}" --durations yes >"$work/out-$i.txt" 2>&1 &
  pids+=($!)
done
status=0; passed=0; failed=0; unfinished=0; notes=()
for ((i = 0; i < shards; i++)); do
  wait "${pids[$i]}"; rc=$?
  (( rc != 0 && status == 0 )) && status=$rc
  # Catch2 2.13 ends with "All tests passed (A assertions in C test cases)" or
  # "test cases: C | P passed | F failed" (a part is left out when it is zero).
  read -r p f < <(awk '
    /^All tests passed/ { for (i = 1; i <= NF; i++) if ($i == "in") p = $(i + 1); done = 1 }
    /^test cases:/ { for (i = 1; i <= NF; i++) { if ($i == "passed") p = $(i - 1); if ($i == "failed") f = $(i - 1) }
                     done = 1 }
    END { if (done) print p + 0, f + 0; else print -1, -1 }' "$work/out-$i.txt")
  # A shard cut off by SECONDS reports the case it was in as failed (Catch2 handles SIGTERM) or
  # nothing at all; the cases it did not reach are counted as not run.
  mine=$(wc -l <"$work/shard-$i.txt")
  (( p < 0 )) && p=0 f=0
  passed=$((passed + p)); failed=$((failed + f))
  (( p + f < mine )) && unfinished=$((unfinished + mine - p - f)) && notes+=("shard $i exit $rc")
  { echo "=== shard $i of $shards: exit $rc"; cat "$work/out-$i.txt"; } >>"$output"
done
line="$cases test cases in $shards shards: $passed passed, $failed failed"
(( unfinished > 0 )) && line+=", $unfinished not run ($(IFS=,; echo "${notes[*]}" | sed 's/,/, /g'))"
echo "$line"
exit "$status"
