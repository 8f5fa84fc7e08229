#!/usr/bin/env bash
# Regenerates cuda-rt-sys/src/bindings_13_0.rs from the headers of the CUDA toolkit that the
# build script finds, with the one canonical configuration (build/bindgen_config.rs).
# Needs libclang (Debian: apt-get install libclang-dev). Run from anywhere in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir=$(cargo build -p cuda-rt-sys --features bindgen --message-format=json \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and m["package_id"].find("cuda-rt-sys") >= 0:
        print(m["out_dir"])')
cp "$out_dir/bindings.rs" src/bindings_13_0.rs
echo "wrote src/bindings_13_0.rs ($(wc -l < src/bindings_13_0.rs) lines) from $out_dir/bindings.rs"
