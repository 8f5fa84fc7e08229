#!/usr/bin/env bash
# clang-format over the workspace's own C, C++ and CUDA sources (style: .clang-format), with a
# pinned clang-format from PyPI's `clang-format` wheel, installed into target/clang-format on
# first use (python3 with pip). `--fix` formats the files in place; without it the script fails
# when a file is not formatted. interop/include/cuda_rt.h is left out: cbindgen writes it
# (`cargo xtask regen header`) and interop/tests/header.rs compares it byte for byte.
# CLANG_FORMAT names another binary of the same version.
set -euo pipefail
cd "$(dirname "$0")/.."
version=19.1.7
clang_format=${CLANG_FORMAT:-target/clang-format/clang_format/data/bin/clang-format}
if [[ ! -x $clang_format ]]; then
  python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --no-warn-script-location --target target/clang-format "clang-format==$version"
fi
if ! "$clang_format" --version | grep -q "version $version"; then
  echo "error: $clang_format is not clang-format $version" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu' '*.cuh' \
  ':!:interop/include/cuda_rt.h')
if [[ ${1:-} == --fix ]]; then
  "$clang_format" -i "${files[@]}"
else
  "$clang_format" --dry-run --Werror "${files[@]}"
  echo "clang-format $version: ${#files[@]} files formatted"
fi
