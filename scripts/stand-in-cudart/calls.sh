#!/bin/bash
# The CUDA calls per operation of the probe (see README.md) in steady state, under the stand-in
# runtime: each 4 KiB copy between two buffers used on one stream must make exactly one call,
# its cudaMemcpyAsync (no event record or wait, no device query or switch), on the legacy,
# per-thread and an owned stream; and a source written once and read on three streams must be
# copied with three cudaMemcpyAsync and nothing else; and a merge round's pattern on two streams
# (`exchange`) must record and wait 4 times per operation. With two devices (`STAND_IN_DEVICES=2`,
# the `*-2` cases) a copy on each of the three streams asks the current device once
# (`cudaGetDevice`) beside its cudaMemcpyAsync, and makes no other call. An empty-kernel launch
# inside `with_ptr_mut_on` (the `launch-*` cases, `STAND_IN_OP=launch`) makes its
# cudaLaunchKernel alone on each stream, and on two devices a default stream's also asks the
# current device once. Exits 1 if any other call is made.
#   bash scripts/stand-in-cudart/calls.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="$(bash "$here/build.sh")"
toolkits=("$root"/.cuda-toolkit/cuda-13*/nvidia/cu13)
export CUDA_PATH="${CUDA_PATH:-${toolkits[0]}}"
CARGO_TARGET_DIR="$root/target/stand-in-cudart/probe" \
  cargo build --release --quiet --manifest-path "$here/probe/Cargo.toml"
probe="$root/target/stand-in-cudart/probe/release/stand-in-probe"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for case in legacy per-thread owned readers exchange legacy-2 per-thread-2 owned-2 \
  launch-legacy launch-per-thread launch-owned launch-legacy-2 launch-per-thread-2 launch-owned-2; do
  devices=1 op=copy stream="${case%-2}"
  [[ "$case" == *-2 ]] && devices=2
  [[ "$stream" == launch-* ]] && op=launch stream="${stream#launch-}"
  # Two runs that differ only in the number of operations: their difference is what the
  # operations call.
  for ops in 1000 3000; do
    STAND_IN_OP=$op STAND_IN_DEVICES=$devices STAND_IN_TRACE=1 STAND_IN_OPS=$ops STAND_IN_TRIALS=1 \
      LD_LIBRARY_PATH="$(dirname "$lib")" "$probe" "$stream" safe > /dev/null 2> "$work/$case.$ops"
  done
  python3 - "$case" "$work/$case.1000" "$work/$case.3000" <<'PY' || status=1
import collections, sys
stream, few, many = sys.argv[1:]
def calls(path):
    return collections.Counter(l.split()[1] for l in open(path) if l.startswith('stand-in: '))
per_operation = {name: n / 2000 for name, n in (calls(many) - calls(few)).items()}
print(f'{stream}: calls per operation: ' + ', '.join(f'{k} {v:g}' for k, v in sorted(per_operation.items())))
if stream == 'exchange':
    want = {'cudaMemsetAsync': 2.0, 'cudaEventRecord': 4.0, 'cudaStreamWaitEvent': 4.0}
elif stream.startswith('launch-'):
    want = {'cudaLaunchKernel': 1.0}
    if stream.endswith('-2') and 'owned' not in stream:
        want['cudaGetDevice'] = 1.0
elif stream.endswith('-2'):
    want = {'cudaMemcpyAsync': 1.0, 'cudaGetDevice': 1.0}
else:
    want = {'cudaMemcpyAsync': 3.0 if stream == 'readers' else 1.0}
sys.exit(0 if per_operation == want else 1)
PY
done
exit $status
