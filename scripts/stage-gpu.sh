#!/usr/bin/env bash
# Stages the whole GPU suite for a machine with a GPU but no Rust toolchain, in one archive
# small enough to carry (the staged binaries are ~240 MB; xz -9 makes ~13 MB: its 64 MiB
# dictionary finds the kernels that every test binary repeats):
#   1. scripts/gpu-bundle.sh: every test/bench/example of the workspace into .gpu/
#   2. what gpu-bundle.sh does not build: the shared libraries the interop runtime tests load
#      from beside their executable, libcuda_rt_interop.a (the standalone C++ program test links
#      it), the CUB sort benchmark (feature cub-bench), the soak
#   3. the CMake example's C++ programs (static and shared runtime; docs/cpp.md), and
#      cuda-rt's examples that check their results against the CPU (the ports of the CUDA
#      samples: those whose main is `common::main`), built as programs (gpu-bundle.sh builds
#      examples as test harnesses, which never run `main`); gpu-bundle.sh's run.sh becomes
#      .gpu/run-tests.sh, and .gpu/run.sh runs it, then each of .gpu/examples.txt with
#      CUDA_RT_REQUIRE_GPU=1 (a missing GPU fails, a wrong result exits non-zero)
#   4. .gpucarry/gpu.tar.xz
# On the GPU machine, from the checkout root (carry .gpucarry):
#   tar -xJf .gpucarry/gpu.tar.xz && bash .gpu/run.sh     # tests, then the checked examples
#   .gpu/bin/bench-runtime_overhead --bench; .gpu/bin/bench-sort-cub --bench; .gpu/bin/soak
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
bash scripts/gpu-bundle.sh
target=${CARGO_TARGET_DIR:-target}
for so in libmylib_own_static_cudart.so libmylib_shared_cudart.so; do
  found=$(ls -t "$target"/release/build/cuda-rt-interop-*/out/$so | head -1)
  cp "$found" .gpu/bin/
done
# The shared runtime of the toolkit this build used (libmylib_shared_cudart.so needs it, and the
# GPU machine's own toolkit may be another major): .gpu/run.sh puts .gpu/bin first in
# LD_LIBRARY_PATH.
lib_dir=$(sed -n 's/^cargo:lib_dir=//p' $(ls -t "$target"/release/build/cuda-rt-sys-*/output | head -1))
cp "$lib_dir"/libcudart.so.1[0-9] .gpu/bin/
# Builds cuda-rt's checked examples as programs (gpu-bundle.sh's `cargo test --all-targets` builds
# examples as test harnesses, which hold no tests and never run `main`), stages each as
# .gpu/bin/example-NAME listed in .gpu/examples.txt (dropping its empty harness), and makes
# .gpu/run.sh run them after gpu-bundle.sh's test run (kept as .gpu/run-tests.sh, same flags:
# --sanitize, --only NAME).
stage_checked_examples() {
  local src name exe
  CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release -p cuda-rt --examples \
    --message-format=json-render-diagnostics > .gpu/examples.json
  : > .gpu/examples.txt
  for src in $(grep -l 'common::main(' cuda-rt/examples/*.rs); do
    name=$(basename "$src" .rs)
    exe=$(executable_of "$name" < .gpu/examples.json | tail -1)
    [[ -n $exe ]] || { echo "error: cargo built no executable for example $name" >&2; exit 1; }
    cp "$exe" ".gpu/bin/example-$name"
    echo "$name" >> .gpu/examples.txt
    rm -f ".gpu/bin/test-$name"
    sed -i "/^test test-$name\$/d" .gpu/manifest.txt
  done
  rm -f .gpu/examples.json
  mv .gpu/run.sh .gpu/run-tests.sh
  cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs the staged test harnesses (.gpu/run-tests.sh, same flags), then the examples of
# .gpu/examples.txt, each of which checks its results against the CPU and exits non-zero on a
# mismatch. Exits non-zero if any of them failed.
cd "$(dirname "$0")/.."
sanitize=0; only=""; args=("$@")
while [[ $# -gt 0 ]]; do case "$1" in
  --sanitize) sanitize=1 ;; --only) only="$2"; shift ;; *) echo "unknown flag $1"; exit 2 ;; esac; shift; done
export LD_LIBRARY_PATH="$PWD/.gpu/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bash .gpu/run-tests.sh "${args[@]}"; fail=$?
logs=.gpu/logs; mkdir -p "$logs"; all="${OUT:-.gpu/logs}/gpu-tests.log"
export CUDA_RT_REQUIRE_GPU=1 RUST_BACKTRACE=1
summary=()
while read -r name; do
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  cmd=(".gpu/bin/example-$name")
  # The kernel-signature check probes one parameter past the last (an expected API error).
  (( sanitize )) && cmd=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 86 "${cmd[@]}")
  start=$(date +%s.%N)
  "${cmd[@]}" > "$logs/example-$name.log" 2>&1; rc=$?
  secs=$(python3 -c "import time;print(f'{time.time()-$start:.1f}')")
  { echo "==== example $name (rc=$rc)"; cat "$logs/example-$name.log"; } >> "$all"
  (( rc != 0 )) && { fail=1; echo "---- example $name FAILED (rc=$rc), last lines:"; tail -25 "$logs/example-$name.log"; }
  summary+=("$(printf '%-40s rc=%-3s %6ss  %s' "example-$name" "$rc" "$secs" "$(tail -1 "$logs/example-$name.log")")")
done < .gpu/examples.txt
# The C++ programs built with CMake (.gpu/cpp.txt): each checks its results against std::sort.
while read -r name; do
  [[ -z "$only" || "$name" == *"$only"* ]] || continue
  cmd=(".gpu/bin/$name")
  (( sanitize )) && cmd=(compute-sanitizer --tool memcheck --error-exitcode 86 "${cmd[@]}")
  start=$(date +%s.%N)
  "${cmd[@]}" > "$logs/$name.log" 2>&1; rc=$?
  secs=$(python3 -c "import time;print(f'{time.time()-$start:.1f}')")
  { echo "==== $name (rc=$rc)"; cat "$logs/$name.log"; } >> "$all"
  (( rc != 0 )) && { fail=1; echo "---- $name FAILED (rc=$rc), last lines:"; tail -25 "$logs/$name.log"; }
  summary+=("$(printf '%-40s rc=%-3s %6ss  %s' "$name" "$rc" "$secs" "$(tail -1 "$logs/$name.log")")")
done < <(cat .gpu/cpp.txt 2>/dev/null)
echo "==== examples and C++ programs (full output in $all)"; printf '%s\n' "${summary[@]}"
exit $fail
RUN
  chmod +x .gpu/run.sh
  echo "checked examples staged: $(tr '\n' ' ' < .gpu/examples.txt)"
}
executable_of() { # cargo's JSON messages on stdin; prints the executable of target $1
  python3 -c 'import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}
CARGO_PROFILE_RELEASE_DEBUG=false cargo bench --features cub-bench --bench sort --no-run \
  --message-format=json-render-diagnostics | executable_of sort | tail -1 | xargs -I{} cp {} .gpu/bin/bench-sort-cub
# The C ABI's static library, which the standalone C++ program test links with the GPU
# machine's nvcc (it looks beside its own binary).
CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release -p cuda-rt-interop
cp "$target"/release/libcuda_rt_interop.a .gpu/bin/
CARGO_PROFILE_RELEASE_DEBUG=false cargo build --release --example soak \
  --message-format=json-render-diagnostics | executable_of soak | tail -1 | xargs -I{} cp {} .gpu/bin/soak
# The CMake example (interop/cpp/CMakeLists.txt, docs/cpp.md) against the static and the shared
# CUDA runtime: cpp_host, and rdc_consumer (relocatable device code of its own beside cuda-rt's),
# staged as .gpu/bin/cpp-PROGRAM-RUNTIME and listed in .gpu/cpp.txt, which .gpu/run.sh runs after
# the examples (the shared ones find libcudart.so.1x in .gpu/bin through LD_LIBRARY_PATH).
stage_cmake_programs() {
  local runtime program
  : > .gpu/cpp.txt
  for runtime in static shared; do
    CARGO_PROFILE_RELEASE_DEBUG=false CARGO_TARGET_DIR="$target" \
      bash interop/scripts/build-cmake-example.sh "$runtime" "$target/cmake-example-$runtime" release
    for program in cpp_host rdc_consumer; do
      cp "$target/cmake-example-$runtime/$program" ".gpu/bin/cpp-$program-$runtime"
      echo "cpp-$program-$runtime" >> .gpu/cpp.txt
    done
  done
}
stage_cmake_programs
stage_checked_examples
strip --strip-debug .gpu/bin/* 2>/dev/null || true
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpucarry/' "$exclude" 2>/dev/null || echo '/.gpucarry/' >> "$exclude"
mkdir -p .gpucarry
tar -cf - .gpu | xz -T1 -9 > .gpucarry/gpu.tar.xz
du -h .gpucarry/gpu.tar.xz | awk '{print "archive: " $1 " (carry [\".gpucarry\"])"}'
