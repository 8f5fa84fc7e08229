#!/usr/bin/env bash
# Checks cuda-rt-sys and cuda-rt against the runtimes of CUDA versions other than the ones CI
# builds the whole workspace with: the oldest 12.x, the newest 12.x and the newest 13.x on PyPI.
# For each, from the runtime wheel (headers and libcudart.so) plus the wheel with `crt/`:
#   - the cuda-rt library compiles against the committed bindings chosen for it,
#     with the items that runtime lacks gated off (so nothing calls a missing function);
#   - the ABI of its headers equals that of the committed bindings chosen for it
#     (cuda-rt-sys's bindings tests, which need libclang).
# Linking needs the static runtime, which these wheels lack (12.9's has it): `cargo clippy`, and
# the dynamic feature so that the build script accepts the libcudart.so it finds.
# Wheels are kept in .cuda-toolkit/headers-<version>/ (a few MB each, 40 MB for 12.x's crt).
set -euo pipefail
cd "$(dirname "$0")/.."
versions=(
  "12.0 nvidia-cuda-runtime-cu12==12.0.146 nvidia-cuda-nvcc-cu12==12.0.140"
  "12.9 nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-nvcc-cu12==12.9.86"
  "13.5 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37"
)
target="${CARGO_TARGET_DIR:-target}/cuda-versions"
for entry in "${versions[@]}"; do
  read -r version runtime headers <<<"$entry"
  dir="$PWD/.cuda-toolkit/headers-$version"
  root="$dir/root"
  if [[ ! -f "$root/include/cuda_runtime_api.h" ]]; then
    rm -rf "$dir"
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --no-warn-script-location --target "$dir/wheels" "$runtime" "$headers"
    mkdir -p "$root/include" "$root/lib"
    for inc in "$dir"/wheels/nvidia/*/include; do cp -a "$inc/." "$root/include/"; done
    cp -a "$dir"/wheels/nvidia/*/lib/libcudart.so.* "$root/lib/"
  fi
  echo "== CUDA $version ($runtime)"
  start=$(date +%s)
  CUDA_PATH="$root" cargo clippy --quiet -p cuda-rt --no-default-features --features dynamic \
    --lib --target-dir "$target" -- -D warnings
  CUDA_PATH="$root" cargo test --quiet -p cuda-rt-sys --no-default-features --features dynamic \
    --test bindings_fresh --target-dir "$target" -- --nocapture 2>&1 \
    | grep -E 'equal those|skipped|test result'
  echo "CUDA $version checked in $(( $(date +%s) - start )) s"
done
