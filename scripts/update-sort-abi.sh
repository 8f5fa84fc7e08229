#!/usr/bin/env bash
# Regenerates src/sort/abi.rs (the Rust side of the sort's C interface) from
# kernels/cuda_rt_sort.h with bindgen, through the test that otherwise checks it
# (tests/sort_abi.rs, which holds the one configuration). Needs libclang (Debian:
# apt-get install libclang-dev). Run from anywhere in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_RT_UPDATE_SORT_ABI=1 CUDA_RT_SYS_REQUIRE_LIBCLANG=1 \
  cargo test -p cuda-rt-kernels --test sort_abi -- --nocapture
