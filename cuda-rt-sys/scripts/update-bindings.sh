#!/usr/bin/env bash
# Regenerates every committed bindings file (cuda-rt-sys/src/bindings/*.rs) from the headers of
# the exact PyPI wheels that build/committed.rs names for it, with the one canonical bindgen
# configuration (build/bindgen_config.rs, through the build script's `bindgen` feature).
# Needs python3 with pip, network access to PyPI and libclang (Debian: apt-get install
# libclang-dev). Run from anywhere in the workspace; `--only NAME` regenerates one file.
set -euo pipefail
cd "$(dirname "$0")/.."
only="${2:-}"
[[ "${1:-}" == "--only" && -n "$only" ]] || only=""
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name wheel wheel, one line per committed file, read from build/committed.rs.
python3 - build/committed.rs > "$work/list" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r'name: "(\w+)".*?source_wheels: \[\s*"([^"]+)",\s*"([^"]+)",?\s*\]', text, re.S):
    print(*m.groups())
PY

while read -r name runtime headers; do
  [[ -z "$only" || "$only" == "$name" ]] || continue
  echo "== $name: $runtime $headers"
  dl="$work/$name/wheels"; root="$work/$name/root"
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$dl" "$runtime" "$headers"
  mkdir -p "$work/$name/x" "$root/include" "$root/lib"
  for w in "$dl"/*.whl; do python3 -m zipfile -e "$w" "$work/$name/x"; done
  # The wheels' folders (nvidia/cu13/..., nvidia/cuda_runtime/..., nvidia/cuda_nvcc/...)
  # merged into one toolkit root that the build script recognizes.
  for inc in $(find "$work/$name/x" -type d -name include -path '*/nvidia/*' -not -path '*/include/*'); do
    cp -a "$inc/." "$root/include/"
  done
  for lib in $(find "$work/$name/x" -type f -name 'libcudart.so.*'); do cp -a "$lib" "$root/lib/"; done
  out_dir=$(CUDA_PATH="$root" cargo build -p cuda-rt-sys --no-default-features \
      --features dynamic,bindgen --target-dir "$work/target" --message-format=json \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "cuda-rt-sys" in m["package_id"]:
        print(m["out_dir"])')
  cp "$out_dir/bindings.rs" "src/bindings/$name.rs"
  echo "wrote src/bindings/$name.rs ($(wc -l < "src/bindings/$name.rs") lines)"
done < "$work/list"
