#!/usr/bin/env bash
# The CPU and CUDA kernel libraries export the same sketchps symbols (kernels/CMakeLists.txt): a
# process picks one at load time, so every function a binary may call must exist in both. Compares
# the demangled, non-template sketchps:: functions each defines; prints the ones the CUDA library
# lacks and exits 1. Usage: abi_parity.sh CPU_LIB CUDA_LIB
set -euo pipefail
[[ $# -eq 2 && -f "$1" && -f "$2" ]] || { echo "usage: abi_parity.sh CPU_LIB CUDA_LIB (both must exist)" >&2; exit 2; }
api() { nm -DC --defined-only "$1" | cut -c20- | grep '^sketchps::' | grep -v '<\|thrust::\|cub::' | sort -u; }
missing=$(comm -23 <(api "$1") <(api "$2"))
count=$(api "$1" | wc -l)
if [[ -n "$missing" ]]; then
  echo "the CUDA kernels lack $(echo "$missing" | wc -l) of the CPU kernels' $count functions:" >&2
  echo "$missing" | head -20 >&2
  exit 1
fi
[[ $count -gt 50 ]] || { echo "only $count functions found in $1: is it the kernels library?" >&2; exit 1; }
echo "both kernel libraries export the same $count functions"
