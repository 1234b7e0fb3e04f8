#!/usr/bin/env bash
# Lists what a runtime image needs so that the given executables find every shared library they
# link, derived from the binaries themselves (ldd) instead of a hand-kept list:
#   runtime-deps.sh packages BINARY...   Debian packages that own the libraries, one a line
#   runtime-deps.sh unowned  BINARY...   libraries no package owns (e.g. the CUDA toolkit's), one a line
#   runtime-deps.sh check    BINARY...   exit 1 if any library but sketchps's own libsketchps_*.so is
#                                        unowned (the CPU image installs packages and copies those
#                                        only, so such a library would be missing there)
# Fails (exit 1, naming them) if a library cannot be found at all. Used by the Dockerfiles' build
# stage; tests/deploy runs it on the built daemons so a missing library shows up in CI, not at
# `docker run`. libc's loader and the vDSO are skipped; so is libcuda (the NVIDIA container runtime
# mounts the driver's copy), and so are the project's own libraries (libsketchps_*: the image copies
# them from the build, e.g. the kernels, kernels/CMakeLists.txt).
set -euo pipefail

usage() { echo "usage: $0 packages|unowned|check BINARY..." >&2; exit 2; }
[[ $# -ge 2 ]] || usage
mode=$1; shift
case $mode in
  packages|unowned) ;;
  check)
    # sketchps's own libraries (the kernels, the Python package's core) are copied by the Dockerfiles.
    unowned=$(bash "$0" unowned "$@" | grep -v '/libsketchps_[^/]*$' || true)
    if [[ -n $unowned ]]; then
      echo "runtime-deps: owned by no Debian package (a package-only image would lack them):" >&2
      echo "$unowned" >&2
      exit 1
    fi
    echo "runtime-deps: $(bash "$0" packages "$@" | wc -l) Debian packages provide every library of: $*"
    exit 0 ;;
  *) usage ;;
esac

libs=()
missing=()
for bin in "$@"; do
  [[ -x $bin ]] || { echo "runtime-deps: $bin is not an executable file" >&2; exit 1; }
  while read -r line; do
    if [[ $line == *"=> not found"* ]]; then
      missing+=("${line%% *} (needed by $bin)")
    elif [[ $line =~ =\>\ (/[^ ]+) ]]; then
      libs+=("${BASH_REMATCH[1]}")
    fi
  done < <(ldd "$bin" 2>/dev/null || true)
done
if [[ ${#missing[@]} -gt 0 ]]; then
  printf 'runtime-deps: library not found: %s\n' "${missing[@]}" >&2
  exit 1
fi

# dpkg records a library under the path its package shipped it at; with merged /usr that may be the
# /lib or the /usr/lib spelling of what ldd printed, or the symlink's target. Ask dpkg about every
# spelling of every library in one call (one call per path would take minutes).
declare -A spellings=()
for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
  case $(basename "$lib") in libcuda.so* | libsketchps_*) continue ;; esac
  real=$(readlink -f "$lib")
  spellings[$lib]="$lib $real ${lib#/usr} /usr${lib} ${real#/usr} /usr${real}"
done
declare -A owner_of=()
while IFS= read -r line; do
  pkgs=${line%%: /*}
  owner_of[${line#*: }]=${pkgs%%[:,]*}
done < <(dpkg-query -S ${spellings[@]+${spellings[@]}} 2>/dev/null || true)

for lib in "${!spellings[@]}"; do
  pkg=""
  for c in ${spellings[$lib]}; do
    [[ -n ${owner_of[$c]:-} ]] && { pkg=${owner_of[$c]}; break; }
  done
  if [[ $mode == packages && -n $pkg ]]; then
    echo "$pkg"
  elif [[ $mode == unowned && -z $pkg ]]; then
    readlink -f "$lib"
  fi
done | sort -u
