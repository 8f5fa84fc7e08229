#!/usr/bin/env bash
# The sort's GPU check under all four compute-sanitizer tools, on the host-queued build (the
# kernels compiled without relocatable device code, which every tool instruments; the
# device-driven build uses dynamic parallelism, which only memcheck instruments). On the GPU
# machine, from the checkout root, after `cargo xtask stage-gpu` here:
#
#   bash scripts/sanitize-sort.sh          # about 4 minutes on an H100
#
# What runs (CUDA_RT_SORT_TEST_DRIVER=host, CUDA_RT_SORT_TEST_QUICK=1, set by sanitize-all.sh):
# - memcheck and synccheck: the whole `sort` and `sort_api` test binaries;
# - initcheck: the whole `sort` binary (`sort_api`'s million-key sorts take longer than 8
#   minutes under it);
# - racecheck, the slowest: the unaligned-slice tests of every key width (both tile widths,
#   every threshold size up to 9 tiles), the pairs test of every value size, and `bad_input`
#   (host-queued u32 sorts among other work).
# Verdicts as in sanitize-all.sh; exit status 0 when every run is clean or explained.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out="${OUT:-.gpu/logs}/sanitize-sort"
export CUDA_RT_SANITIZE_TIMEOUT="${CUDA_RT_SANITIZE_TIMEOUT:-540}"
run() { # log folder, then sanitize-all.sh arguments
  bash scripts/sanitize-all.sh --log-dir "$out/$1" "${@:2}" > "$out/$1.txt" 2>&1
}
mkdir -p "$out"
run memcheck --bins "test-sort test-sort_api" --tools memcheck -j 2 &
run synccheck --bins "test-sort test-sort_api" --tools synccheck -j 2 &
run initcheck --bins test-sort --tools initcheck -j 1 &
for width in 1 2 4 8; do
  run "racecheck-unaligned-$width" --bins test-sort --filter "unaligned_slices_of_${width}_byte" \
    --tools racecheck -j 1 &
done
run racecheck-pairs --bins test-sort --filter pairs_are_stable --tools racecheck -j 1 &
run racecheck-bad_input --bins test-bad_input --tools racecheck -j 1 &
wait
fail=0
echo "==== the sort under compute-sanitizer (host-queued build); logs in $out"
for summary in "$out"/*.txt; do
  name=$(basename "$summary" .txt)
  grep -E '^test-' "$summary" | sed "s/^/$name: /"
  grep -q '^==== no findings' "$summary" || fail=1
done
echo "==== $([[ $fail == 0 ]] && echo "no unexplained findings" || echo "FINDINGS or FAILED TESTS above")"
exit $fail
