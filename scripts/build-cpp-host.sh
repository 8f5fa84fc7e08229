#!/usr/bin/env bash
# Builds the standalone C++ program cpp/host_program.cu against the Rust static library
# libcuda_rt_interop.a, the way a C++ CUDA project would link cuda-rt.
#
#   cargo xtask build-cpp-host [static|dynamic|static-nvcc-default] [OUTPUT]
#   (or bash scripts/build-cpp-host.sh with the same arguments)
#
# static (default): libcuda_rt_interop.a carries the CUDA runtime (libcudart_static.a), so the
#   program is linked with `-cudart none`: one runtime in the process.
# dynamic: the library is built with `--features dynamic` and the program links libcudart.so
#   (`-lcudart`), the same shared runtime the Rust code calls.
# static-nvcc-default: as static, but with nvcc's default `-cudart static`. It links, and still
#   has one runtime: nvcc puts libcudart_static.a after the inputs, whose copy of the runtime
#   (inside libcuda_rt_interop.a) already defines every symbol, so no member of it is loaded.
#
# nvcc: $NVCC, else $CUDA_PATH/bin/nvcc, else nvcc on PATH, else /usr/local/cuda/bin/nvcc, else
# the toolkit provisioned in this checkout (.cuda-toolkit/). GPU architectures: $CUDA_RT_ARCHS
# (as for the Rust build: `80`, `sm_80`, `compute_80`, `all`; default 80,90).
set -euo pipefail

mode=${1:-static}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=${2:-$target/release/cuda_rt_cpp_host_$mode}

case $mode in
    static | static-nvcc-default) features=() ;;
    dynamic) features=(--no-default-features --features dynamic) ;;
    *) echo "usage: $0 [static|dynamic|static-nvcc-default] [OUTPUT]" >&2; exit 2 ;;
esac

find_nvcc() {
    local candidate
    for candidate in "${NVCC:-}" "${CUDA_PATH:+$CUDA_PATH/bin/nvcc}" "$(command -v nvcc || true)" \
        /usr/local/cuda/bin/nvcc "$root"/.cuda-toolkit/*/nvidia/cu13/bin/nvcc; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then echo "$candidate"; return; fi
    done
    echo "error: no nvcc found; set NVCC or CUDA_PATH" >&2
    exit 1
}
nvcc=$(find_nvcc)
cuda_lib=$(dirname "$nvcc")/../lib64
[ -d "$cuda_lib" ] || cuda_lib=$(dirname "$nvcc")/../lib
cuda_lib=$(cd "$cuda_lib" && pwd)

(cd "$root" && cargo build -p cuda-rt-interop --release "${features[@]}")
lib=$target/release/libcuda_rt_interop.a

# CUDA_RT_ARCHS as cuda-rt-build reads it: `80` machine code and PTX, `sm_80` machine code,
# `compute_80` PTX, `all` the architectures this nvcc supports among cuda-rt-build's list.
gencode=()
list=${CUDA_RT_ARCHS:-80,90}
if [ "$list" = all ]; then
    supported=$("$nvcc" --list-gpu-arch | sed 's/compute_//' | tr '\n' ' ')
    list=$(for a in 75 80 86 89 90 100 120; do [[ " $supported " == *" $a "* ]] && printf '%s,' "$a"; done)
fi
IFS=',' read -ra archs <<<"$list"
for arch in "${archs[@]}"; do
    arch=${arch// /}; arch=${arch//./}
    case "$arch" in
        "") ;;
        sm_*) gencode+=("-gencode=arch=compute_${arch#sm_},code=sm_${arch#sm_}") ;;
        compute_*) gencode+=("-gencode=arch=${arch},code=${arch}") ;;
        *) gencode+=("-gencode=arch=compute_${arch},code=[sm_${arch},compute_${arch}]") ;;
    esac
done

if [ "$mode" = static ]; then
    runtime=(-cudart none)
elif [ "$mode" = static-nvcc-default ]; then
    runtime=("-L$cuda_lib" "-Xlinker" "-Map=$out.map")
else
    # PyPI wheels ship only libcudart.so.<major>: give the linker an unversioned name.
    link_dir=$cuda_lib
    if [ ! -e "$cuda_lib/libcudart.so" ]; then
        link_dir=$target/cudart-link
        mkdir -p "$link_dir"
        versioned=("$cuda_lib"/libcudart.so.1[0-9])
        ln -sf "${versioned[0]}" "$link_dir/libcudart.so"
    fi
    runtime=(-cudart none "-L$link_dir" -lcudart "-Xlinker" "-rpath=$cuda_lib")
fi

set -x
"$nvcc" -std=c++17 -O2 "${gencode[@]}" -I "$root/interop/include" \
    "$root/interop/cpp/host_program.cu" "$lib" -o "$out" \
    "${runtime[@]}" -ldl -lpthread -lrt -lm
