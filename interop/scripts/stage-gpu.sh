#!/usr/bin/env bash
# Builds the interop tests and the standalone C++ program in both link modes (release) and stages
# them in .gpu-interop/ of the checkout, with run.sh, for a GPU machine without cargo:
#
#   interop/scripts/stage-gpu.sh
#   # on the GPU machine, from the checkout root (CUDA 13 in /usr/local/cuda):
#   bash .gpu-interop/run.sh          # every binary with CUDA_RT_REQUIRE_GPU=1
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
stage=$root/.gpu-interop
rm -rf "$stage"
mkdir -p "$stage"

for mode in static dynamic; do
    features=()
    [ "$mode" = dynamic ] && features=(--no-default-features --features dynamic)
    mkdir -p "$stage/$mode"
    cargo test -p cuda-rt-interop --release "${features[@]}" --no-run --message-format=json \
        | python3 -c '
import json, os, shutil, sys
stage = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if "cuda-rt-interop" not in m.get("package_id", ""):
        continue
    # The integration tests (the unit tests of the library need no GPU and stay here).
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable") \
            and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], os.path.join(stage, m["target"]["name"]))
    if m.get("reason") == "build-script-executed":
        for so in ("libmylib_own_static_cudart.so", "libmylib_shared_cudart.so"):
            shutil.copy(os.path.join(m["out_dir"], so), os.path.join(stage, so))
' "$stage/$mode"
    interop/scripts/build-cpp-host.sh "$mode" "$stage/$mode/cpp_host"
    if [ "$mode" = static ]; then
        interop/scripts/build-cpp-host.sh static-nvcc-default "$stage/static/cpp_host_nvcc_default"
        # The linker map shows that libcudart_static.a contributed nothing (one runtime).
        echo "members of libcudart_static.a loaded with nvcc's default -cudart static:" \
            "$(grep -c 'libcudart_static.a(' "$stage/static/cpp_host_nvcc_default.map" || true)"
        rm "$stage/static/cpp_host_nvcc_default.map"
    fi
    strip --strip-debug "$stage/$mode"/* 2>/dev/null || true
done

cat >"$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the staged interop binaries on a GPU machine, from the checkout root. The full log goes to
# $OUT/interop.log when OUT is set; stdout gets the summary lines.
cd "$(dirname "$0")/.."
export CUDA_RT_REQUIRE_GPU=1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
log=${OUT:-/tmp}/interop.log
: >"$log"
status=0
run() {
    echo "=== $*" | tee -a "$log"
    timeout 120 "$@" >>"$log" 2>&1
    local rc=$?
    echo "=== exit $rc: $*" | tee -a "$log"
    [ $rc -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for mode in static dynamic; do
    for test in rust_calls_cpp cpp_calls_rust runtimes c_abi_sort header; do
        run ".gpu-interop/$mode/$test" --test-threads=1 --nocapture
    done
    run ".gpu-interop/$mode/cpp_host"
    run ".gpu-interop/$mode/cpp_host" --sticky
done
run .gpu-interop/static/cpp_host_nvcc_default
grep -E "^(fact:|cpp-host: (FAIL|all)|test result|skipped|.*panicked|=== )" "$log" | grep -v "^=== [^e]" | head -150
exit $status
RUN
chmod +x "$stage/run.sh"
du -sh "$stage"/* "$stage"
