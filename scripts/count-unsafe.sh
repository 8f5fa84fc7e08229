#!/usr/bin/env bash
# Counts `unsafe` in the workspace's Rust code, per crate and per kind of target: `unsafe { }`
# blocks, `unsafe fn`s, `unsafe impl`s, `unsafe extern` blocks, and `// SAFETY:` comments.
# Comment and doc lines are not code and are skipped (doc examples are counted apart).
# The generated bindings of cuda-rt-sys (src/bindings.rs) are reported on a line of their own.
#
#   bash scripts/count-unsafe.sh            # a Markdown table (docs/reliability.md, "Unsafe audit")
#
# Every `unsafe {}` block and `unsafe impl` must carry a `// SAFETY:` comment: CI denies
# clippy's `undocumented_unsafe_blocks` (a workspace lint) on every target of every crate.
set -euo pipefail
cd "$(dirname "$0")/.."

# count FILES... -> "blocks fns impls externs safety"
count() {
  if (( $# == 0 )); then echo "0 0 0 0 0"; return; fi
  # Code lines only: drop lines whose first non-blank characters are // (comments, docs).
  local code
  code=$(grep -hv -E '^[[:space:]]*//' "$@" || true)
  local blocks fns impls externs safety
  blocks=$(grep -oE '(^|[^_[:alnum:]])unsafe[[:space:]]*\{' <<<"$code" | wc -l || true)
  fns=$(grep -oE '(^|[^_[:alnum:]])unsafe[[:space:]]+(extern[[:space:]]+"[^"]*"[[:space:]]+)?fn[[:space:]]' <<<"$code" | wc -l || true)
  impls=$(grep -oE '(^|[^_[:alnum:]])unsafe[[:space:]]+impl\b' <<<"$code" | wc -l || true)
  externs=$(grep -oE '(^|[^_[:alnum:]])unsafe[[:space:]]+extern[[:space:]]+"[^"]*"[[:space:]]*\{' <<<"$code" | wc -l || true)
  safety=$(grep -hoE '//[[:space:]]*SAFETY' "$@" | wc -l || true)
  echo "$blocks $fns $impls $externs $safety"
}

# Rust files of a crate's area, excluding generated bindings and build outputs.
files() {
  local crate="$1" area="$2"
  local dirs=()
  case "$area" in
    library) dirs=("$crate/src") ;;
    build) [[ -f "$crate/build.rs" ]] && { echo "$crate/build.rs"; return; }; dirs=("$crate/build") ;;
    tests) dirs=("$crate/tests") ;;
    examples) dirs=("$crate/examples") ;;
    benches) dirs=("$crate/benches") ;;
  esac
  for d in "${dirs[@]}"; do
    [[ -d $d ]] || continue
    find "$d" -name '*.rs' -not -path 'cuda-rt-sys/src/bindings.rs' -not -path '*/compile_fail/*' | sort
  done
}

crates=(cuda-rt-sys cuda-rt cuda-rt-testing interop .)
echo "| crate | target | \`unsafe {}\` blocks | \`unsafe fn\` | \`unsafe impl\` | \`unsafe extern\` blocks | \`// SAFETY:\` comments |"
echo "|---|---|---:|---:|---:|---:|---:|"
total=(0 0 0 0 0)
for crate in "${crates[@]}"; do
  name=$crate; [[ $crate == . ]] && name="cuda-rt-kernels (root)"
  for area in library build tests examples benches; do
    mapfile -t fs < <(files "$crate" "$area")
    (( ${#fs[@]} )) || continue
    read -r b f i e s < <(count "${fs[@]}")
    (( b + f + i + e + s )) || continue
    echo "| $name | $area | $b | $f | $i | $e | $s |"
    total=($((total[0] + b)) $((total[1] + f)) $((total[2] + i)) $((total[3] + e)) $((total[4] + s)))
  done
done
echo "| **all** | | **${total[0]}** | **${total[1]}** | **${total[2]}** | **${total[3]}** | **${total[4]}** |"
mapfile -t generated < <(find cuda-rt-sys/src -path 'cuda-rt-sys/src/bindings.rs')
if (( ${#generated[@]} )); then
  read -r b f i e s < <(count "${generated[@]}")
  fns_declared=$(grep -cE '^[[:space:]]*pub fn ' "${generated[@]}" | awk -F: '{s += $NF} END {print s}')
  echo
  printf 'Generated bindings (%s, every ABI; a function or impl that ABIs declare differently counts once per definition): %s `unsafe extern` blocks declaring %s foreign functions, %s `unsafe {}` blocks (bindgen'"'"'s zero-filling `Default` impls), no hand-written code.\n' \
    "${generated[*]}" "$e" "$fns_declared" "$b"
fi
