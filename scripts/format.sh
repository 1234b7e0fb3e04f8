#!/usr/bin/env bash
# Formats the tree's C++ with clang-format-14 and the repository's .clang-format.
#   bash scripts/format.sh           rewrite every tracked .cc, .h and .cu file in place
#   bash scripts/format.sh --check   change nothing; exit 1 and name the files that differ (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format-14 >/dev/null || { echo "format: clang-format-14 is missing (bash scripts/setup.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
case "${1:-}" in
  --check)
    # One clang-format process per 64 files, two at a time (a process per file spent a minute
    # starting up on CI's 2 cores); only a failing batch is checked file by file, to name them.
    bad=()
    if ! printf '%s\0' "${files[@]}" | xargs -0 -n 64 -P 2 clang-format-14 --dry-run -Werror >/dev/null 2>&1; then
      for f in "${files[@]}"; do
        clang-format-14 --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
      done
    fi
    if [[ ${#bad[@]} -gt 0 ]]; then
      echo "format: ${#bad[@]} file(s) differ from .clang-format (run bash scripts/format.sh):" >&2
      printf '  %s\n' "${bad[@]}" >&2
      exit 1
    fi
    echo "format: ${#files[@]} files follow .clang-format" ;;
  "") clang-format-14 -i "${files[@]}"; echo "format: ${#files[@]} files formatted" ;;
  *) echo "format: unknown option $1 (--check or nothing)" >&2; exit 2 ;;
esac
