#!/usr/bin/env bash
# Configures and builds the CMake example (interop/cpp/CMakeLists.txt: cpp_host and the
# rdc_consumer with relocatable device code of its own) against cuda_rt::interop, which builds
# libcuda_rt_interop.a with cargo. Needs cmake (Debian: apt-get install cmake) and no GPU.
#
#   interop/scripts/build-cmake-example.sh [static|shared] [BUILD_DIR] [release|debug]
#
# CMake's nvcc: $CUDACXX, else $CUDA_PATH/bin/nvcc, else nvcc on PATH, else
# /usr/local/cuda/bin/nvcc, else the toolkit provisioned in this checkout (.cuda-toolkit/: PyPI
# wheels, whose libraries are in lib/ while nvcc.profile names lib64/, hence -L in
# CMAKE_CUDA_FLAGS). Architectures: $CMAKE_CUDA_ARCHITECTURES (default 80;90, cuda-rt's own
# default). cargo builds as it does by itself in this checkout (its own toolkit search,
# CUDA_RT_ARCHS of the environment) in $CARGO_TARGET_DIR (default target/ of the checkout), so
# that an earlier `cargo build -p cuda-rt-interop` of the same profile is reused as it is.
set -euo pipefail
runtime=${1:-static}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/target/cmake-example-$runtime}
profile=${3:-release}

find_nvcc() {
    local candidate
    for candidate in "${CUDACXX:-}" "${CUDA_PATH:+$CUDA_PATH/bin/nvcc}" "$(command -v nvcc || true)" \
        /usr/local/cuda/bin/nvcc "$root"/.cuda-toolkit/cuda-13*/nvidia/cu13/bin/nvcc; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return; fi
    done
    echo "error: no nvcc found; set CUDACXX or CUDA_PATH" >&2
    exit 1
}
nvcc=$(find_nvcc)
toolkit=$(cd "$(dirname "$nvcc")/.." && pwd)
flags=()
if [ ! -d "$toolkit/lib64" ] && [ -d "$toolkit/lib" ]; then
    flags+=("-DCMAKE_CUDA_FLAGS=-L$toolkit/lib")
fi

set -x
cmake -S "$root/interop/cpp" -B "$build" \
    -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-80;90}" \
    -DCUDA_RT_INTEROP_CUDA_PATH= -DCUDA_RT_INTEROP_ARCHS= \
    -DCUDA_RT_INTEROP_RUNTIME="$runtime" \
    -DCUDA_RT_INTEROP_PROFILE="$profile" \
    -DCUDA_RT_INTEROP_CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" \
    "${flags[@]}"
cmake --build "$build" -j "$(nproc)"
