#!/usr/bin/env bash
# Runs every staged test binary under the four compute-sanitizer tools (memcheck with leak
# checking, racecheck, synccheck, initcheck) and prints one summary line per binary and tool.
# On the GPU machine, from the checkout root, after `cargo xtask stage-gpu` staged .gpu/ here:
#
#   bash scripts/sanitize-all.sh                      # every test binary of .gpu/manifest.txt
#   bash scripts/sanitize-all.sh --bin-dir DIR        # every executable in DIR instead
#   bash scripts/sanitize-all.sh --only stateful --tools "memcheck initcheck" -j 4
#   bash scripts/sanitize-all.sh --bins "test-sort test-bad_input" --filter unaligned
#   bash scripts/sanitize-all.sh --summary-only --log-dir DIR   # the summary of earlier logs
#
# --bins names the staged binaries exactly (--only matches a part of the name); --filter is
# passed to each binary as its test-name filter.
#
# Each run gets a verdict: "clean" (0 errors or hazards, tests passed), "FINDINGS", "TESTS
# FAILED", or one of two explained kinds:
# - "clean (DP module not instrumented)": racecheck, synccheck and initcheck do not instrument
#   code that uses CUDA dynamic parallelism, and say so once ("CUDA Dynamic Parallelism is not
#   supported by the selected tool", counted as one error or warning) when such a kernel runs:
#   the root package's device-driven sort, the test kernels' device-side fill (one warning per
#   such library). They still check every other kernel of the binary, the sort's host-queued
#   build (no relocatable device code) included; this verdict means those warnings were the only
#   reports.
# - "explained (bulk-copy stores)", initcheck only: every report is a plain load, in a keys-only
#   merge pass, of global memory that a bulk copy (TMA, cp.async.bulk) wrote, or a host copy
#   of such memory or of memory only device-driven (uninstrumented) kernels wrote. initcheck
#   does not see bulk-copy stores as initializing (scripts/initcheck_bulk_store.cu shows it on
#   a 30-line program whose values are checked); every report is classified (no print limit).
# Exit status 0 when no run has findings or failed tests. Logs: one file per binary and tool
# under --log-dir (default $OUT/sanitize, or .gpu/logs/sanitize).
#
# Settings, and why:
# - --error-exitcode 86: a finding fails the run even when the tests pass.
# - --target-processes application-only: tests/faults.rs runs deliberate faults (an
#   out-of-bounds store) in child processes; those are the point of the test, not findings.
# - --report-api-errors no: the bad-input tests make CUDA calls fail on purpose and assert the
#   error each returns; a returned error is not a memory or synchronization finding.
# - memcheck --leak-check full: device allocations still live when the context is torn down.
# - synccheck --num-cuda-barriers 65536: the four-way merge's grids keep more mbarriers alive
#   than the tool tracks by default; it then warns of an overflow and fails the kernel.
# - CUDA_RT_UNDER_SANITIZER=1: tests skip exact memory figures (the tool allocates its own).
# - CUDA_RT_SORT_TEST_DRIVER=host: the sanitizer does not follow device-side launches (it flags
#   the device runtime's own launch buffers); the sort's kernels are the same either way.
# - CUDA_RT_SORT_TEST_QUICK=1, CUDA_RT_STATEFUL_CASES=32: smaller inputs (the tools run kernels
#   10-100x slower); override by setting them.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

bin_dir=""; only=""; bins=""; filter=""; jobs=4; summary_only=0
tools="memcheck racecheck synccheck initcheck"
log_dir="${OUT:-.gpu/logs}/sanitize"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin-dir) bin_dir="$2"; shift ;;
    --only) only="$2"; shift ;;
    --bins) bins="$2"; shift ;;
    --filter) filter="$2"; shift ;;
    --tools) tools="$2"; shift ;;
    -j) jobs="$2"; shift ;;
    --log-dir) log_dir="$2"; shift ;;
    --summary-only) summary_only=1 ;;
    -h|--help) sed -n '2,50p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)"; exit 2 ;;
  esac
  shift
done

# Whether every one of an initcheck log's $2 reports is of the explained kinds (see the header):
# a global read in a keys-only merge pass (NoValue), or a host copy's read of device memory.
explained_initcheck() {
  local log="$1" want="$2" reads host
  reads=$(grep -A1 '^========= Uninitialized __global__ memory read' "$log" \
    | grep -cE '^=========     at void [a-z_]+::merge_pass_kernel<[^,]+, [a-z_]+::NoValue,')
  host=$(grep -A1 '^========= Host API memory access error' "$log" \
    | grep -c '^=========     Uninitialized access to .* on access by cudaMemcpy source')
  echo "  initcheck $log: $reads keys-only merge-pass reads, $host host copies, of $want reports" >&2
  (( want > 0 && reads + host == want ))
}

# The verdict of one log (see the header), and the line the summary prints for it.
summarize() {
  local log="$1" name tool summary tests verdict
  name=$(basename "$log" .log); tool=${name##*.}; name=${name%.*}
  summary=$(grep -E '========= (ERROR|RACECHECK) SUMMARY: [0-9]+ (error|hazard)s?( displayed[^)]*\))?$' "$log" | tail -1 | sed 's/^========= //')
  tests=$(grep -E '^test result:' "$log" | tail -1 | sed 's/^test result: //; s/; finished in.*//')
  local dp=0 count=0
  # One warning per module that uses dynamic parallelism (every crate with device-side launches).
  dp=$(grep -c 'Dynamic Parallelism is not supported by the selected tool' "$log")
  count=$(sed -nE 's/.*SUMMARY: ([0-9]+) (error|hazard).*/\1/p' <<< "$summary")
  if [[ "$tests" != ok* ]]; then verdict="TESTS FAILED"
  elif [[ "$summary" =~ SUMMARY:\ 0\ (errors|hazards) ]]; then verdict="clean"
  elif [[ $tool != memcheck && $dp -gt 0 && "$count" == "$dp" ]]; then
    verdict="clean (DP module not instrumented)"
  elif [[ $tool == initcheck ]] && explained_initcheck "$log" "$(( count - dp ))"; then
    verdict="explained (bulk-copy stores)"
  else verdict="FINDINGS"; fi
  printf '%-26s %-10s %-34s %-46s %s\n' "$name" "$tool" "$verdict" "${summary:-no sanitizer summary}" "${tests:-no test result}"
}

if (( summary_only )); then
  fail=0
  for log in "$log_dir"/*.log; do
    line=$(summarize "$log"); echo "$line"
    [[ "$line" == *FINDINGS* || "$line" == *"TESTS FAILED"* ]] && fail=1
  done
  exit $fail
fi

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x "$sanitizer" ]] || { echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin)"; exit 2; }
mkdir -p "$log_dir"

binaries=()
if [[ -n "$bins" ]]; then
  for b in $bins; do binaries+=(".gpu/bin/$b"); done
elif [[ -z "$bin_dir" ]]; then
  [[ -f .gpu/manifest.txt ]] || { echo "no .gpu/manifest.txt: stage with cargo xtask stage-gpu, or pass --bin-dir"; exit 2; }
  while read -r kind name; do
    [[ $kind == test ]] && binaries+=(".gpu/bin/$name")
  done < .gpu/manifest.txt
else
  for f in "$bin_dir"/*; do [[ -f $f && -x $f ]] && binaries+=("$f"); done
fi
selected=()
for b in "${binaries[@]}"; do
  [[ -z "$only" || "$(basename "$b")" == *"$only"* ]] && selected+=("$b")
done
(( ${#selected[@]} )) || { echo "no test binaries selected"; exit 2; }

export CUDA_RT_REQUIRE_GPU=1 CUDA_RT_UNDER_SANITIZER=1 RUST_BACKTRACE=1
export CUDA_RT_SORT_TEST_DRIVER="${CUDA_RT_SORT_TEST_DRIVER:-host}"
export CUDA_RT_SORT_TEST_QUICK="${CUDA_RT_SORT_TEST_QUICK:-1}"
export CUDA_RT_STATEFUL_CASES="${CUDA_RT_STATEFUL_CASES:-32}"
export sanitizer log_dir filter
timeout_s="${CUDA_RT_SANITIZE_TIMEOUT:-1800}"
export timeout_s

# One binary under one tool; writes <log_dir>/<binary>.<tool>.log and .rc. (xargs runs it
# through `bash -c`, which shellcheck cannot follow.)
# shellcheck disable=SC2317
run_one() {
  local bin="$1" tool="$2" name extra=()
  name=$(basename "$bin")
  case "$tool" in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report all) ;;
    synccheck) extra=(--num-cuda-barriers 65536) ;;
    initcheck) extra=(--print-limit 100000000) ;;  # every report, so that each is classified
  esac
  local log="$log_dir/$name.$tool.log" start
  start=$(date +%s)
  timeout "$timeout_s" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 86 \
    --target-processes application-only --report-api-errors no \
    "$bin" ${filter:+"$filter"} --test-threads=4 > "$log" 2>&1
  echo "$? $(( $(date +%s) - start ))" > "$log_dir/$name.$tool.rc"
}
export -f run_one

echo "compute-sanitizer: $("$sanitizer" --version | tail -1)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
echo "${#selected[@]} binaries x tools [$tools], $jobs at a time; logs in $log_dir"
rm -f "$log_dir"/*.rc "$log_dir"/*.log
# shellcheck disable=SC2016  # $0 and $1 belong to the `bash -c` that xargs starts
for b in "${selected[@]}"; do for t in $tools; do printf '%s\0%s\0' "$b" "$t"; done; done \
  | xargs -0 -n 2 -P "$jobs" bash -c 'run_one "$0" "$1"'

echo "==== sanitizer summary"
printf '%-26s %-10s %-34s %-46s %s\n' binary tool verdict "sanitizer summary" tests
fail=0
for b in "${selected[@]}"; do
  for t in $tools; do
    log="$log_dir/$(basename "$b").$t.log"
    if [[ ! -f $log ]]; then echo "$(basename "$b") $t: no log"; fail=1; continue; fi
    line=$(summarize "$log")
    read -r rc secs < "$log_dir/$(basename "$b").$t.rc" 2>/dev/null || { rc="?"; secs="?"; }
    echo "$line (rc=$rc, ${secs}s)"
    [[ "$line" == *FINDINGS* || "$line" == *"TESTS FAILED"* ]] && fail=1
  done
done
echo "==== $([[ $fail == 0 ]] && echo "no findings" || echo "FINDINGS or FAILED TESTS above (see the logs)")"
exit $fail
