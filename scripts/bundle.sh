#!/usr/bin/env bash
# The relocatable bundle (docs/gpu.md): what a GPU node without the build's packages needs to run
# sketchps, as one archive.
#
#   bash scripts/bundle.sh [--data N] [OUT_DIR]   # default build/bundle; writes OUT_DIR/sketchps-<version>-linux-<arch>.tar.gz
#                                                 # (only that: the staging tree is removed), with sketchps/COMMIT
#
# It builds the `ci` preset (CPU kernels and, where nvcc is, the CUDA kernels for compute_80 PTX and
# sm_90 code; BUNDLE_CUDA_ARCHS overrides "80-virtual;90-real"), then `cmake --install`s the
# `runtime` and `tests` components into OUT_DIR/sketchps:
#   bin/                  sketchps, sketchps-server, sketchps-bench (RPATH $ORIGIN/../lib)
#   lib/                  libsketchps_kernels.so (CPU) and every shared library the binaries need
#                         but glibc, libstdc++ and the GPU driver (CMake's runtime dependency sets)
#   lib/cuda/             libsketchps_kernels.so (CUDA): LD_LIBRARY_PATH=.../lib/cuda selects it
#   libexec/sketchps/tests/  the unit suites that run on a GPU (kernels, engine, schemes)
#   include/sketchps/     python_core.h: the API of lib/libsketchps_python_core.so, the package's C++ core
#   python/               the Python package's sources, for pip against the node's Python and torch:
#                         SKETCHPS_PREFIX=$PWD/sketchps python3 -m pip install --no-build-isolation sketchps/python
#   gpu-check.sh, suite-shards.sh, train-check.sh, bench/   the GPU acceptance run (scripts/gpu-check.sh) and its tables
#   examples/pytorch/     fashion_mnist.py and .yaml (the acceptance run's training job)
#   share/fashion-mnist/  the first N (--data, default 30000; 0: none) training images of Fashion-MNIST
#                         and every test image, for nodes without Debian's dataset-fashion-mnist
# The archive unpacks anywhere: tar -xzf sketchps-*.tar.gz && sketchps/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
data=30000
if [[ ${1:-} == --data ]]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "bundle: --data needs a number of training images (0: none)" >&2; exit 2; }
  data=$2; shift 2
fi
out="${1:-build/bundle}"
bash scripts/setup.sh
cmake --preset ci -DSKETCHPS_CUDA_ARCHS="${BUNDLE_CUDA_ARCHS:-80-virtual;90-real}" >/dev/null  # sm_90 code for Hopper, PTX for the rest
bash scripts/build.sh ci
rm -rf "$out/sketchps"
mkdir -p "$out"
for component in runtime tests; do
  cmake --install build/ci --prefix "$out/sketchps" --component "$component" >/dev/null
done
# Libraries find each other in lib/ too (a RUNPATH applies to an object's own dependencies only).
for f in "$out"/sketchps/lib/*.so*; do
  [[ -L "$f" ]] || patchelf --set-rpath '$ORIGIN' "$f"
done
mkdir -p "$out/sketchps/bench" "$out/sketchps/examples/pytorch"
cp scripts/gpu-check.sh scripts/suite-shards.sh scripts/train-check.sh "$out/sketchps/"
cp bench/gpu/torch_peers.py bench/gpu/gpu_report.py bench/reproduction/table.py "$out/sketchps/bench/"
cp examples/pytorch/fashion_mnist.py examples/pytorch/fashion_mnist.yaml "$out/sketchps/examples/pytorch/"
if [[ $data -gt 0 ]]; then
  /usr/bin/python3 bench/gpu/fmnist_subset.py --train "$data" --out "$out/sketchps/share/fashion-mnist"
fi
# The package's sources (setup.py builds sketchps._core against the bundle's lib/ and include/).
mkdir -p "$out/sketchps/python/src"
cp -r python/setup.py python/pyproject.toml python/sketchps python/include "$out/sketchps/python/"
cp python/src/module.cc "$out/sketchps/python/src/"
find "$out/sketchps/python" -name __pycache__ -prune -exec rm -rf {} +
# The commit it was made from ("-dirty" with uncommitted changes), which gpu-device-run.sh reports.
echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo -dirty)" \
  >"$out/sketchps/COMMIT"
version=$(sed -n 's/^project(sketchps VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
archive="$out/sketchps-$version-linux-$(uname -m).tar.gz"  # gzip: every node can unpack it
rm -f "$out"/sketchps-*.tar.gz  # one archive: gpu-device-run.sh takes the one it finds
tar -C "$out" -czf "$archive" sketchps
files=$(find "$out/sketchps" -type f | wc -l)
rm -rf "$out/sketchps"  # the archive is what travels (the device tool carries 64 MiB in all)
echo "bundle: $archive ($(du -h "$archive" | cut -f1); $files files; commit $(tar -xzOf "$archive" sketchps/COMMIT))"
