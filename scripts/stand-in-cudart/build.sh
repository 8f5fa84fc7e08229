#!/bin/bash
# Builds the stand-in runtime into target/stand-in-cudart/libcudart.so.13 (see README.md).
# Needs gcc, nm and python3, and the CUDA 13 toolkit this checkout provisions (or CUDA_PATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
toolkits=("$root"/.cuda-toolkit/cuda-13*/nvidia/cu13)
cuda="${CUDA_PATH:-${toolkits[0]}}"
[[ -f "$cuda/lib/libcudart.so.13" ]] || { echo "no CUDA 13 toolkit at '$cuda' (set CUDA_PATH)"; exit 2; }
out="$root/target/stand-in-cudart"
mkdir -p "$out"
python3 - "$cuda/lib/libcudart.so.13" "$here/stand_in.c" "$out" <<'PY'
import re, subprocess, sys
lib, own, out = sys.argv[1:]
exported = sorted({l.split()[2].split('@')[0] for l in subprocess.run(
    ['nm', '-D', '--defined-only', lib], capture_output=True, text=True, check=True).stdout.splitlines()
    if len(l.split()) == 3 and l.split()[1] == 'T'})
defined = set(re.findall(r'^\S.*?\b(cuda\w+)\(', open(own).read(), re.M))
# Every other export: returns cudaSuccess, and names itself under STAND_IN_TRACE=1.
lines = ['#include <stdio.h>', '#include <stdlib.h>',
         'static void note(const char *n) { if (getenv("STAND_IN_TRACE")) fprintf(stderr, "stand-in: %s\\n", n); }']
lines += [f'int {f}(void) {{ note("{f}"); return 0; }}' for f in exported if f not in defined]
# The code cudaMemcpyAsync runs through to evict the instruction cache: 48 KiB of distinct steps.
steps = ''.join(f'STEP({i}) ' for i in range(1200))
open(f'{out}/stubs.c', 'w').write('\n'.join(lines) + '\n')
open(f'{out}/evict.c', 'w').write('#include <stdint.h>\n#define STEP(i) x ^= x >> ((i) % 13 + 1); x *= 0x9E3779B97F4A7C15ull ^ (i); x += (i);\n'
    f'__attribute__((noinline)) uint64_t stand_in_evict_code(uint64_t x) {{ {steps} return x; }}\n')
PY
echo 'libcudart.so.13 { global: *; };' > "$out/version.map"
gcc -O2 -fPIC -shared -I"$cuda/include" -Wl,--version-script="$out/version.map" \
  -Wl,-soname,libcudart.so.13 "$here/stand_in.c" "$out/stubs.c" "$out/evict.c" -o "$out/libcudart.so.13"
echo "$out/libcudart.so.13"
