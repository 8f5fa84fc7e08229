#!/usr/bin/env bash
# Regenerates interop/include/cuda_rt.h from the exports in interop/src/ with cbindgen
# (interop/cbindgen.toml): the header is never edited by hand. tests/header.rs runs the same
# generation and fails while the committed header differs from it.
#
#   interop/scripts/update-header.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
CUDA_RT_UPDATE_HEADER=1 cargo test -p cuda-rt-interop --test header \
    header_is_generated_from_the_exports -- --exact
git diff --stat -- interop/include/cuda_rt.h 2>/dev/null || true
