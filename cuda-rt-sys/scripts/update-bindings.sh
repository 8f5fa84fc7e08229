#!/usr/bin/env bash
# Regenerates the committed bindings (cuda-rt-sys/src/bindings.rs): the bindings of every ABI
# that build/committed.rs lists, each from the headers of the exact PyPI wheels it names for
# that ABI, with the one canonical bindgen configuration (build/bindgen_config.rs, through the
# build script's `bindgen` feature), merged into one file by scripts/merge_bindings.rs.
# Needs python3 with pip, network access to PyPI, libclang (Debian: apt-get install
# libclang-dev) and rustc. Run from anywhere in the workspace; `--only NAME` regenerates one
# ABI and takes the others from the current src/bindings.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
only="${2:-}"
[[ "${1:-}" == "--only" && -n "$only" ]] || only=""
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name wheel wheel, one line per committed ABI (oldest first), read from build/committed.rs.
python3 - build/committed.rs > "$work/list" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r'name: "(\w+)".*?source_wheels: \[\s*"([^"]+)",\s*"([^"]+)",?\s*\]', text, re.S):
    print(*m.groups())
PY

rustc --edition 2021 -O -o "$work/merge_bindings" scripts/merge_bindings.rs
names=$(cut -d' ' -f1 "$work/list")
if [[ -n "$only" ]] && ! grep -qx "$only" <<<"$names"; then
  echo "no ABI named $only in build/committed.rs (there are: $(echo $names))" >&2
  exit 1
fi
mkdir -p "$work/generated"
while read -r name runtime headers; do
  if [[ -n "$only" && "$only" != "$name" ]]; then
    # shellcheck disable=SC2086 # one argument per ABI name
    "$work/merge_bindings" project src/bindings.rs "$name" $names > "$work/generated/$name.rs"
    continue
  fi
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
  cp "$out_dir/bindings.rs" "$work/generated/$name.rs"
  echo "generated the $name bindings ($(wc -l < "$work/generated/$name.rs") lines)"
done < "$work/list"

inputs=()
for name in $names; do inputs+=("$name=$work/generated/$name.rs"); done
"$work/merge_bindings" merge src/bindings.rs "${inputs[@]}"
echo "wrote src/bindings.rs ($(wc -l < src/bindings.rs) lines)"
