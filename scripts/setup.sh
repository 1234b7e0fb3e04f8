#!/usr/bin/env bash
# Installs the Debian 12 packages sketchps needs to build, test and run. Idempotent: when
# everything is present it checks and returns in well under a second, without touching apt.
# Must run as root (or with sudo available) when something is missing.
set -euo pipefail

PACKAGES=(
  g++ cmake ninja-build pkg-config git
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  catch2 libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libboost-dev zlib1g-dev libyaml-cpp-dev
  libfp16-dev libeigen3-dev libxxhash-dev prometheus-cpp-dev libssl-dev
  python3 python3-yaml iproute2 nftables python3-torch python3-matplotlib python3-dev pybind11-dev python3-pytest
  clang-14 clang-format-14 libclang-rt-14-dev libomp-14-dev
  libtorch-dev dataset-fashion-mnist
  patchelf python3-pybind11 python3-pip python3-setuptools python3-wheel
)
# Thrust comes with the CUDA toolkit (CCCL); without the toolkit, Debian's copy serves the CPU build.
if [[ ! -d /usr/local/cuda/include/cccl ]]; then
  PACKAGES+=(libthrust-dev libcub-dev)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: missing packages (${missing[*]}) and not root; rerun as root" >&2; exit 1; }
  SUDO="sudo"
fi
echo "setup: installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
