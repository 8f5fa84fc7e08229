#!/usr/bin/env bash
# The GPU bundle's runner: `cargo xtask stage-gpu` copies it to .gpu/run.sh. On the GPU machine
# (no cargo needed), from the checkout root:
#
#   tar -xJf .gpucarry/gpu.tar.xz && bash .gpu/run.sh
#   bash .gpu/run.sh --sanitize      # each program under compute-sanitizer memcheck
#   bash .gpu/run.sh --only NAME     # only the programs whose name contains NAME
#   bash .gpu/run.sh --skip NAME     # all but the programs whose name contains NAME
#   CUDA_RT_GPU_PROGRAM_TIMEOUT=SECS # each program's time limit (default 300): a program that
#                                    # hangs is killed, reported as failed (rc 124 or 137), and
#                                    # the rest still run
#
# What runs, with CUDA_RT_REQUIRE_GPU=1 (a test that finds no GPU fails instead of skipping):
#   1. every test harness of .gpu/manifest.txt (`test NAME` lines);
#   2. cuda-rt's checked examples (.gpu/examples.txt, staged as .gpu/bin/example-NAME), each of
#      which checks its results against the CPU and exits non-zero on a mismatch;
#   3. the C++ programs built with CMake (.gpu/cpp.txt), each checked against std::sort.
# .gpu/bin comes first in LD_LIBRARY_PATH: it holds the shared CUDA runtime of the toolkit the
# bundle was built with, which the shared-runtime programs need.
# The full output goes to $OUT/gpu-tests.log ($OUT unset: .gpu/logs/); a summary line per program
# comes last. Exits non-zero if any program failed.
cd "$(dirname "$0")/.." || exit 2
sanitize=0; only=""; skip=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --only) only="$2"; shift ;;
    --skip) skip="$2"; shift ;;
    *) echo "unknown flag $1 (flags: --sanitize, --only NAME, --skip NAME)"; exit 2 ;;
  esac
  shift
done
logs=.gpu/logs; mkdir -p "$logs"
all="${OUT:-.gpu/logs}/gpu-tests.log"; : > "$all"
export CUDA_RT_REQUIRE_GPU=1 RUST_BACKTRACE=1
# NCCL for cuda-rt-nccl's suites: the library CUDA_RT_NCCL_LIBRARY names, else the one of
# Python's NVIDIA wheels where they are installed; then a missing NCCL fails those suites.
# NVLink multicast stays off (it can take a shared machine's GPUs out of service).
export NCCL_NVLS_ENABLE=0
if [[ -z "${CUDA_RT_NCCL_LIBRARY:-}" ]]; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
  if [[ -n "$nccl" && -f "$nccl" ]]; then export CUDA_RT_NCCL_LIBRARY="$nccl"; fi
fi
if [[ -n "${CUDA_RT_NCCL_LIBRARY:-}" ]]; then
  export CUDA_RT_REQUIRE_NCCL=1
  echo "NCCL: $CUDA_RT_NCCL_LIBRARY"
else
  echo "NCCL: none found (cuda-rt-nccl's suites will say they skipped)"
fi
export LD_LIBRARY_PATH="$PWD/.gpu/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fail=0; summary=()

# Runs one staged program: run_one LABEL RESULT_PATTERN COMMAND... (RESULT_PATTERN: the line of
# its log that the summary shows; empty: the last line).
run_one() {
  local label="$1" pattern="$2" log="$logs/$1.log" start rc secs result
  shift 2
  start=$(date +%s.%N)
  timeout --kill-after=15 "${CUDA_RT_GPU_PROGRAM_TIMEOUT:-300}" "$@" > "$log" 2>&1; rc=$?
  secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  if [[ -n $pattern ]]; then result=$(grep -E "$pattern" "$log" | tail -1); else result=$(tail -1 "$log"); fi
  { echo "==== $label (rc=$rc)"; cat "$log"; } >> "$all"
  if (( rc != 0 )); then
    fail=1
    (( rc == 124 || rc == 137 )) && echo "---- $label: killed after its time limit (a hang?)"
    echo "---- $label FAILED (rc=$rc), last lines:"
    tail -25 "$log"
  fi
  summary+=("$(printf '%-40s rc=%-3s %6ss  %s' "$label" "$rc" "$secs" "$result")")
}

selected() { [[ -z "$only" || "$1" == *"$only"* ]] && [[ -z "$skip" || "$1" != *"$skip"* ]]; }

memcheck=(compute-sanitizer --tool memcheck --error-exitcode 86)
while read -r kind name; do
  [[ $kind == test ]] || continue
  selected "$name" || continue
  cmd=(".gpu/bin/$name")
  (( sanitize )) && cmd=("${memcheck[@]}" "${cmd[@]}")
  run_one "$name" '^test result:' "${cmd[@]}"
done < .gpu/manifest.txt

while read -r name; do
  selected "$name" || continue
  cmd=(".gpu/bin/example-$name")
  # The kernel-signature check probes one parameter past the last (an expected API error).
  (( sanitize )) && cmd=("${memcheck[@]}" --report-api-errors no "${cmd[@]}")
  run_one "example-$name" '' "${cmd[@]}"
done < .gpu/examples.txt

while read -r name; do
  selected "$name" || continue
  cmd=(".gpu/bin/$name")
  (( sanitize )) && cmd=("${memcheck[@]}" "${cmd[@]}")
  run_one "$name" '' "${cmd[@]}"
done < .gpu/cpp.txt

echo "==== summary (full output in $all)"
printf '%s\n' "${summary[@]}"
exit $fail
