#!/usr/bin/env bash
# Stages the whole GPU suite for a machine with a GPU but no Rust toolchain, in one archive
# small enough to carry (the staged binaries are ~240 MB; xz -9 makes ~13 MB: its 64 MiB
# dictionary finds the kernels that every test binary repeats):
#   1. ../shared/gpu/bundle.sh: every test/bench/example of the workspace into .gpu/
#   2. what bundle.sh does not know about: the shared libraries the interop runtime tests load
#      from beside their executable, libcuda_rt_interop.a (the standalone C++ program test links
#      it), the CUB sort benchmark (feature cub-bench), the soak
#   3. .gpucarry/gpu.tar.xz
# On the GPU machine, from the checkout root (carry .gpucarry):
#   tar -xJf .gpucarry/gpu.tar.xz && bash .gpu/run.sh
#   .gpu/bin/bench-runtime_overhead --bench; .gpu/bin/bench-sort-cub --bench; .gpu/bin/soak
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
bash ../shared/gpu/bundle.sh
target=${CARGO_TARGET_DIR:-target}
for so in libmylib_own_static_cudart.so libmylib_shared_cudart.so; do
  found=$(ls -t "$target"/release/build/cuda-rt-interop-*/out/$so | head -1)
  cp "$found" .gpu/bin/
done
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
strip --strip-debug .gpu/bin/* 2>/dev/null || true
grep -qxF '/.gpucarry/' .git/info/exclude || echo '/.gpucarry/' >> .git/info/exclude
mkdir -p .gpucarry
tar -cf - .gpu | xz -T1 -9 > .gpucarry/gpu.tar.xz
du -h .gpucarry/gpu.tar.xz | awk '{print "archive: " $1 " (carry [\".gpucarry\"])"}'
