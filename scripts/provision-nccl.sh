#!/usr/bin/env bash
# Installs NCCL for this checkout into .cuda-toolkit/nccl-2.28.9-cu13 (once; later runs reuse
# it) and prints the path of its library, for cuda-rt-nccl:
#   CUDA_RT_NCCL_LIBRARY=$(bash scripts/provision-nccl.sh) cargo test -p cuda-rt-nccl
#
# The library comes from NVIDIA's PyPI wheel, pinned exactly (`cu12` as the first argument: the
# CUDA 12 build of the same release). About 300 MB to download. Needs python3 with pip and
# access to PyPI. cuda-rt-nccl loads NCCL at run time: nothing is needed to build.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda="${1:-cu13}"
[[ "$cuda" == cu12 || "$cuda" == cu13 ]] || { echo "usage: $0 [cu12|cu13]" >&2; exit 2; }
version=2.28.9
root="$PWD/.cuda-toolkit/nccl-$version-$cuda"
library="$root/nvidia/nccl/lib/libnccl.so.2"
if [[ -f "$library" ]]; then
  echo "$library"
  exit 0
fi
echo "provisioning NCCL $version ($cuda) into $root (about 300 MB)" >&2
staging="$root.partial-$$"
rm -rf "$staging"
python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-warn-script-location \
  --target "$staging" "nvidia-nccl-$cuda==$version" >&2
mv "$staging" "$root"
echo "$library"
