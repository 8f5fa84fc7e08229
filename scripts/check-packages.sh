#!/usr/bin/env bash
# Checks the crates meant for crates.io (cuda-rt-sys, cuda-rt, cuda-rt-build, cuda-rt-testing) as
# a user receives them, without a GPU:
#   1. `cargo publish --workspace --dry-run`: each is packaged, and each package builds from its
#      packaged files alone (Cargo verifies them in dependency order, the unpublished ones served
#      from a local overlay of the registry);
#   2. the packages are unpacked into a folder outside this repository (no .cargo/config.toml of
#      ours, nothing provisioned by the workspace), joined there by a throwaway workspace whose
#      [patch.crates-io] names the unpacked copies, and `cargo test` builds and runs every test
#      they carry (the skip-without-GPU tests skip loudly) with only CUDA_PATH set.
# Needs a CUDA toolkit: CUDA_PATH, or the one `cargo test` provisioned for this checkout.
#
#   bash scripts/check-packages.sh [--allow-dirty]    # about a minute on 2 cores (CI: 55 s)
#
# (--allow-dirty, for a checkout with uncommitted changes, goes to both Cargo commands.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
target="${CARGO_TARGET_DIR:-target}/packages"
# The provisioned toolkit's folder is named after its pins (cuda-rt-sys/build/provision.rs), so
# it is globbed, as interop/scripts/build-cmake-example.sh does.
provisioned=$(ls -d "$root"/.cuda-toolkit/cuda-13*/nvidia/cu13 2>/dev/null | head -n 1 || true)
toolkit="${CUDA_PATH:-$provisioned}"
if [[ ! -x "$toolkit/bin/nvcc" ]]; then
  echo "check-packages: no CUDA toolkit at $toolkit (set CUDA_PATH, or run \`cargo test\` first)" >&2
  exit 1
fi

crates=(cuda-rt-sys cuda-rt cuda-rt-build cuda-rt-testing)
rm -rf "$target/package"
cargo publish --workspace --dry-run --target-dir "$target" "$@"
echo "check-packages: dry runs passed in $(( $(date +%s) - start )) s"
# The .crate files themselves (the dry run keeps them in a private folder of Cargo's).
packages=()
for crate in "${crates[@]}"; do packages+=(-p "$crate"); done
cargo package "${packages[@]}" --no-verify --target-dir "$target" "$@"

# The unpacked crates, outside the repository (cargo looks for configuration upwards from there).
work=$(mktemp -d "${TMPDIR:-/tmp}/cuda-rt-packages.XXXXXX")
trap 'rm -rf "$work"' EXIT
members=() patches=()
for crate in "${crates[@]}"; do
  file=$(ls "$target"/package/"$crate"-[0-9]*.crate)
  tar -xzf "$file" -C "$work"
  dir=$(basename "$file" .crate)
  members+=("\"$dir\"")
  patches+=("$crate = { path = \"$dir\" }")
done
{
  echo "[workspace]"
  echo "members = [$(IFS=,; echo "${members[*]}")]"
  echo 'resolver = "2"'
  echo
  echo "[patch.crates-io]"
  printf '%s\n' "${patches[@]}"
} > "$work/Cargo.toml"
log="$work/test.log"
if ! (cd "$work" && env -u CUDA_RT_SYS_PROVISION_DIR CUDA_PATH="$toolkit" \
  CARGO_TARGET_DIR="$work/target" cargo test --workspace >"$log" 2>&1); then
  tail -n 80 "$log" >&2
  echo "check-packages: the unpacked crates' tests failed (above: the end of their log)" >&2
  exit 1
fi
grep -E '^ *(Running|Doc-tests)|^test result|^skipped' "$log"
echo "check-packages: the unpacked crates built and passed their tests in $(( $(date +%s) - start )) s"
