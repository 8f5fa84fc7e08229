#!/usr/bin/env bash
# Builds every test, benchmark, example and program of the workspace on this machine (no GPU
# needed) and copies the executables into .gpu/bin, with .gpu/manifest.txt naming each and
# .gpu/run.sh running the test harnesses on a machine that has a GPU but no Rust toolchain.
# scripts/stage-gpu.sh calls it, adds what it does not build, and packs the result.
#
#   bash scripts/gpu-bundle.sh            # release build of every target
#   bash scripts/gpu-bundle.sh --debug    # debug build (larger; for debugging)
#
# On the GPU machine, from the checkout root:
#   bash .gpu/run.sh                 # every test harness, CUDA_RT_REQUIRE_GPU=1 (a skip fails)
#   bash .gpu/run.sh --sanitize      # each under compute-sanitizer memcheck
#   bash .gpu/run.sh --only NAME     # the harnesses whose name contains NAME
# The full output goes to $OUT/gpu-tests.log ($OUT unset: .gpu/logs/); the summary comes last.
set -euo pipefail
profile=release
[[ "${1:-}" == "--debug" ]] && profile=debug
root=$(git rev-parse --show-toplevel)
cd "$root"
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
rm -rf .gpu && mkdir -p .gpu/bin
build=(--workspace --all-targets --message-format=json-render-diagnostics)
[[ $profile == release ]] && build+=(--release)
# `cargo test --no-run` builds tests and benches as libtest harnesses, examples and binaries
# as programs; its JSON messages name each executable.
CARGO_PROFILE_RELEASE_DEBUG=false cargo test "${build[@]}" --no-run > .gpu/cargo.json
python3 - "$root" <<'PY'
import json, os, shutil, sys

root = sys.argv[1]
harnesses, programs = [], []
with open(os.path.join(root, ".gpu/cargo.json")) as messages:
    for line in messages:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        executable = message.get("executable")
        if message.get("reason") != "compiler-artifact" or not executable:
            continue
        target = message["target"]
        if "lib" in target["kind"]:
            # A library's unit tests: named after its package.
            package = message["package_id"].split("#")[0].rsplit("/", 1)[-1].split("@")[0]
            name = package + "-lib"
        else:
            name = target["name"]
        if message["profile"]["test"]:
            kind = "bench" if "bench" in target["kind"] else "test"
            staged = f"{kind}-{name}"
            harnesses.append((kind, staged))
        else:
            staged = name
            programs.append(staged)
        shutil.copy2(executable, os.path.join(root, ".gpu/bin", staged))
with open(os.path.join(root, ".gpu/manifest.txt"), "w") as manifest:
    for kind, staged in harnesses:
        manifest.write(f"{kind} {staged}\n")
    for staged in programs:
        manifest.write(f"program {staged}\n")
print(f"staged {len(harnesses)} test and bench harnesses and {len(programs)} programs")
PY
strip --strip-debug .gpu/bin/* 2>/dev/null || true
rm -f .gpu/cargo.json
cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs the staged test harnesses on the GPU machine (see scripts/gpu-bundle.sh).
cd "$(dirname "$0")/.."
sanitize=0; only=""
while [[ $# -gt 0 ]]; do case "$1" in
  --sanitize) sanitize=1 ;; --only) only="$2"; shift ;; *) echo "unknown flag $1"; exit 2 ;; esac; shift; done
logs=.gpu/logs; mkdir -p "$logs"; all="${OUT:-.gpu/logs}/gpu-tests.log"; : > "$all"
export CUDA_RT_REQUIRE_GPU=1 RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fail=0; summary=()
while read -r kind name; do
  [[ $kind == test ]] || continue
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  cmd=(".gpu/bin/$name")
  (( sanitize )) && cmd=(compute-sanitizer --tool memcheck --error-exitcode 86 "${cmd[@]}")
  start=$(date +%s.%N)
  "${cmd[@]}" > "$logs/$name.log" 2>&1; rc=$?
  secs=$(python3 -c "import time;print(f'{time.time()-$start:.1f}')")
  result=$(grep -E '^test result:' "$logs/$name.log" | tail -1)
  { echo "==== $name (rc=$rc)"; cat "$logs/$name.log"; } >> "$all"
  (( rc != 0 )) && { fail=1; echo "---- $name FAILED (rc=$rc), last lines:"; tail -25 "$logs/$name.log"; }
  summary+=("$(printf '%-40s rc=%-3s %6ss  %s' "$name" "$rc" "$secs" "$result")")
done < .gpu/manifest.txt
echo "==== summary (full output in $all)"; printf '%s\n' "${summary[@]}"
exit $fail
RUN
chmod +x .gpu/run.sh
du -sh .gpu | awk '{print "bundle size: " $1}'
