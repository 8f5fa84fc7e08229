#!/usr/bin/env bash
# Compiles the root package's kernels for every GPU architecture that CUDA_RT_ARCHS=all names
# (7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0, less those the toolkit's nvcc lacks), so that CI sees
# an architecture-specific compile error (an instruction ptxas refuses for one architecture, a
# guard that is missing) without a GPU of each kind. Needs a CUDA toolkit (the provisioned one,
# as for `cargo test`), no GPU.
#
#   bash scripts/check-archs.sh    # about 4 minutes on 2 cores (350 s of CPU), fresh target
#
# What runs: `cargo build --release -p cuda-rt-kernels --lib` with CUDA_RT_ARCHS=all in a
# target folder of its own (target/arch-all; CARGO_TARGET_DIR overrides it): nvcc and ptxas for
# each architecture, twice (kernels/ as relocatable device code, and the sort without it), and
# the device link for each. Then, where cuobjdump is installed, the machine code and PTX that
# the two libraries' device images hold, one line per architecture (the library with
# relocatable device code keeps its PTX in the objects' relocatable fat binaries, which only
# `cuobjdump -all` lists).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/arch-all}"
start=$(date +%s)

CUDA_RT_ARCHS=all cargo build --release -p cuda-rt-kernels --lib
echo "CUDA_RT_ARCHS=all: the root package's kernels built in $(( $(date +%s) - start )) s"

# The newest build's libraries (one folder per build-script run: take the latest).
out=$(ls -td "$CARGO_TARGET_DIR"/release/build/cuda-rt-kernels-*/out/cuda-rt-build 2>/dev/null |
  head -n 1)
cuobjdump=$(command -v cuobjdump || true)
if [[ -z "$cuobjdump" || -z "$out" ]]; then
  echo "skipped the listing of the libraries' device code: no cuobjdump on PATH"
  exit 0
fi
for lib in cuda_rt_kernels/libcuda_rt_kernels.a cuda_rt_sort_nordc/libcuda_rt_sort_nordc.a; do
  echo "$lib:"
  "$cuobjdump" --list-elf --list-ptx "$out/$lib" 2>/dev/null | grep -o '\(sm\|compute\)_[0-9]*\.\(cubin\|ptx\)' |
    sort -u | sed 's/^/  /'
done
