#!/usr/bin/env bash
# Builds pipeline.cu alone and linked with cdp.cu, then runs each a few times on 3 streams
# (and once on 1). With CCCL_INCLUDE set to another CCCL's include folder (e.g. the one build.rs
# installs, .cuda-toolkit/cccl-13.1.115/nvidia/cu13/include/cccl), also pipeline.cu built against
# it. Needs nvcc and a GPU; run from anywhere.
set -u
cd "$(dirname "$0")" || exit 2
out=${OUT:-/tmp}/cub-merge-streams; mkdir -p "$out"
arch=${ARCH:-sm_90}
nvcc -arch="$arch" -O2 -o "$out/plain" pipeline.cu || exit 3
nvcc -arch="$arch" -rdc=true -c cdp.cu -o "$out/cdp.o" &&
  nvcc -arch="$arch" -DWITH_CDP -c pipeline.cu -o "$out/pipeline.o" &&
  nvcc -arch="$arch" -dlink "$out/cdp.o" -o "$out/dlink.o" -lcudadevrt &&
  nvcc -arch="$arch" "$out/pipeline.o" "$out/cdp.o" "$out/dlink.o" -lcudadevrt -o "$out/with_cdp" || exit 3
for _ in 1 2 3; do timeout 120 "$out/plain" 3 15; echo "plain, S=3: rc=$?"; done
timeout 120 "$out/plain" 1 15; echo "plain, S=1: rc=$?"
for _ in 1 2 3; do timeout 120 "$out/with_cdp" 3 15; echo "device runtime linked, S=3: rc=$?"; done
for _ in 1 2 3; do timeout 120 "$out/with_cdp" 3 15 cdp; echo "device runtime used once, S=3: rc=$?"; done
if [[ -n "${CCCL_INCLUDE:-}" ]]; then
  nvcc -arch="$arch" -O2 -I"$CCCL_INCLUDE" -o "$out/plain_cccl" pipeline.cu || exit 3
  for _ in 1 2 3; do timeout 120 "$out/plain_cccl" 3 15; echo "plain, $CCCL_INCLUDE, S=3: rc=$?"; done
fi
