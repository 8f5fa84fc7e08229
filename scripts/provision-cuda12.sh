#!/usr/bin/env bash
# Installs a CUDA 12.4.1 toolkit for this checkout into .cuda-toolkit/cuda-12.4.1 (once; later
# runs reuse it) and prints its root, for builds against CUDA 12:
#   CUDA_PATH=$(cargo xtask provision-cuda12) cargo test
#
# NVIDIA's CUDA 12 wheels on PyPI carry headers, the runtime and ptxas, but not the nvcc driver,
# cicc, cudafe++, nvlink or fatbinary, and only 12.9's runtime wheel has libcudart_static.a and
# libcudadevrt.a. Debian packages CUDA 12.4.1 (non-free, trixie) complete: its nvcc tools and
# static libraries, with PyPI's headers of the same release, make one toolkit in the standard
# layout (bin/, nvvm/, include/, lib64/). Every download is pinned (wheel versions, package
# SHA-256). Needs python3 with pip, dpkg-deb and access to PyPI and deb.debian.org.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/.cuda-toolkit/cuda-12.4.1"
if [[ -x "$root/bin/nvcc" && -f "$root/lib64/libcudart_static.a" ]]; then
  echo "$root"
  exit 0
fi

wheels=(nvidia-cuda-nvcc-cu12==12.4.131 nvidia-cuda-runtime-cu12==12.4.127
        nvidia-cuda-cccl-cu12==12.4.127.post1)
pool=http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit
debs=("nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319"
      "nvidia-cuda-dev_12.4.127~12.4.1-2_amd64.deb d846838f914a0176948d48a8bcade5d6dbcccb5c9374343f6475f5503f173ee0")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "provisioning CUDA 12.4.1 into $root (about 1 GB to download, 150 MB kept)" >&2

python3 -m pip install --quiet --disable-pip-version-check --no-deps --no-warn-script-location \
  --target "$work/wheels" "${wheels[@]}" >&2
for entry in "${debs[@]}"; do
  read -r file sha <<<"$entry"
  python3 - "$pool/${file//\~/%7E}" "$work/$file" "$sha" <<'PY' >&2
import hashlib, sys, urllib.request
url, path, want = sys.argv[1:]
digest = hashlib.sha256()
with urllib.request.urlopen(url) as response, open(path, "wb") as out:
    while chunk := response.read(1 << 20):
        digest.update(chunk)
        out.write(chunk)
if digest.hexdigest() != want:
    sys.exit(f"{url}: SHA-256 {digest.hexdigest()}, expected {want}")
PY
done

staging="$root.partial-$$"
rm -rf "$staging"
mkdir -p "$staging"/{bin,nvvm/bin,nvvm/libdevice,include,lib64}
dpkg-deb -x "$work/nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb" "$work/toolkit"
tools="$work/toolkit/usr/lib/nvidia-cuda-toolkit"
cp -a "$tools/bin/nvcc" "$tools/bin/crt" "$staging/bin/"
cp -a "$tools/bin/cicc" "$staging/nvvm/bin/"
cp -a "$tools/libdevice/libdevice.10.bc" "$staging/nvvm/libdevice/"
for tool in cudafe++ fatbinary nvlink ptxas bin2c nvprune cuobjdump cu++filt; do
  cp -a "$work/toolkit/usr/bin/$tool" "$staging/bin/"
done
# Only the static runtime and device runtime of the 900 MB development package.
dpkg-deb --fsys-tarfile "$work/nvidia-cuda-dev_12.4.127~12.4.1-2_amd64.deb" \
  | tar -x -C "$work" ./usr/lib/x86_64-linux-gnu/libcudart_static.a \
      ./usr/lib/x86_64-linux-gnu/libcudadevrt.a ./usr/lib/x86_64-linux-gnu/libculibos.a
cp -a "$work"/usr/lib/x86_64-linux-gnu/*.a "$staging/lib64/"
nv="$work/wheels/nvidia"
cp -a "$nv/cuda_runtime/include/." "$nv/cuda_nvcc/include/." "$nv/cuda_cccl/include/." "$staging/include/"
cp -a "$nv/cuda_runtime/lib/libcudart.so.12" "$staging/lib64/"
find "$staging" -name __init__.py -delete
find "$staging" -name __pycache__ -prune -exec rm -rf {} +
cat > "$staging/bin/nvcc.profile" <<'PROFILE'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
PROFILE
"$staging/bin/nvcc" --version | grep -q 'release 12.4' || { echo "the assembled nvcc does not run" >&2; exit 1; }
rm -rf "$root"
mv "$staging" "$root"
echo "$root"
