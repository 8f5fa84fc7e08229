#!/usr/bin/env bash
# Regenerates the committed NCCL bindings (cuda-rt-nccl/src/sys.rs) from the nccl.h of the exact
# PyPI wheel pinned below, with the configuration of scripts/bindgen_config.rs (through the
# `regenerate` test of tests/nccl_bindings.rs). Needs python3 with pip, network access to PyPI,
# libclang (Debian: apt-get install libclang-dev) and a CUDA toolkit in CUDA_PATH (nccl.h
# includes cuda_runtime.h). Run from anywhere in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel="nvidia-nccl-cu13==2.32.3"
: "${CUDA_PATH:?CUDA_PATH must name a CUDA toolkit (the workspace provisions one in .cuda-toolkit/)}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work" "$wheel"
python3 - "$work" <<'PY'
import glob, sys, zipfile
work = sys.argv[1]
with zipfile.ZipFile(glob.glob(work + "/*.whl")[0]) as z:
    z.extract("nvidia/nccl/include/nccl.h", work)
PY
CUDA_RT_NCCL_INCLUDE="$work/nvidia/nccl/include" \
  cargo test -p cuda-rt-nccl --test nccl_bindings -- --ignored --exact regenerate --nocapture
