#!/bin/bash
# Instructions and first-level cache misses per operation of the probe (see README.md), under
# the stand-in runtime with STAND_IN_EVICT=1, counted by cachegrind.
#   bash scripts/stand-in-cudart/profile.sh [legacy|per-thread|owned]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
stream="${1:-owned}"
ops="${STAND_IN_OPS:-20000}"
lib="$root/target/stand-in-cudart/libcudart.so.13"
[[ -f "$lib" ]] || bash "$here/build.sh" > /dev/null
toolkits=("$root"/.cuda-toolkit/cuda-13*/nvidia/cu13)
export CUDA_PATH="${CUDA_PATH:-${toolkits[0]}}"
CARGO_TARGET_DIR="$root/target/stand-in-cudart/probe" \
  cargo build --release --quiet --manifest-path "$here/probe/Cargo.toml"
probe="$root/target/stand-in-cudart/probe/release/stand-in-probe"
for side in raw safe; do
  STAND_IN_EVICT=1 STAND_IN_OPS="$ops" STAND_IN_TRIALS=1 LD_LIBRARY_PATH="$(dirname "$lib")" \
    valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=2097152,16,64 \
    --cachegrind-out-file="$root/target/stand-in-cudart/cachegrind.$side" "$probe" "$stream" "$side" \
    > /dev/null 2>&1
  # Per operation, outside the stand-in's own code (its copy and its eviction), and leaving out
  # what runs once (functions run fewer times than there are operations).
  cg_annotate --threshold=0 --auto=no --show=Ir,I1mr,D1mr,D1mw \
    "$root/target/stand-in-cudart/cachegrind.$side" 2>/dev/null | python3 -c "
import re, sys
total = [0, 0, 0, 0]
for line in sys.stdin:
    m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+([\d,.]+)(?: \(\s*[\d.]+%\))?\s+([\d,.]+)(?: \(\s*[\d.]+%\))?\s+([\d,.]+)(?: \(\s*[\d.]+%\))?\s+(\S+)', line)
    if not m or 'PROGRAM' in line or re.search(r'cudaMemcpyAsync|cudaLaunchKernel|stand_in_driver_work|stand_in_evict_code', m.group(5)):
        continue
    counts = [0 if v == '.' else int(v.replace(',', '')) for v in m.groups()[:4]]
    if counts[0] >= $ops:
        total = [a + b for a, b in zip(total, counts)]
print('$stream $side: per operation %.0f instructions, %.1f I1 misses, %.1f D1 read misses, %.1f D1 write misses' % tuple(t / $ops for t in total))
"
done
