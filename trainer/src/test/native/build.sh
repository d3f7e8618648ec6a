#!/usr/bin/env bash
# Builds the CUDA-driver emulator the tests run the CUDA backend on (see cuda_emulator.cpp):
#   OUT/libcuda.so.1     the driver, with the project's kernels (trainer/src/main/cuda) compiled in
#   OUT/libcublas.so.12  the cuBLAS calls the backend makes, over Debian's OpenBLAS
# Called by the trainer module's build (generate-test-resources); needs only g++ and
# libopenblas-dev.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}"
cuda="$here/../../main/cuda"
mkdir -p "$out"
# Up to date: both libraries newer than every source they are built from.
newest_source=$(ls -t "$here"/* "$cuda"/*.cu "$cuda"/*.cuh | head -n 1)
if [ "$out/libcuda.so.1" -nt "$newest_source" ] && [ "$out/libcublas.so.12" -nt "$newest_source" ]; then
  exit 0
fi
flags=(-std=c++17 -O2 -fPIC -shared -pthread -ffp-contract=off -fvisibility=hidden
  -Wall -Wno-unused-function)
g++ "${flags[@]}" -DRAMTRAIN_EMULATOR -I"$here" -I"$cuda" -include "$here/cuda_shim.h" \
  -Wl,-soname,libcuda.so.1 -o "$out/libcuda.so.1.tmp" \
  "$here/cuda_emulator.cpp" -x c++ "$cuda/kernels.cu"
mv "$out/libcuda.so.1.tmp" "$out/libcuda.so.1"
if [ ! -e /usr/include/x86_64-linux-gnu/cblas.h ] && [ ! -e /usr/include/cblas.h ] \
  && ! ls /usr/include/x86_64-linux-gnu/openblas*/cblas.h >/dev/null 2>&1; then
  echo "build.sh: the emulated cuBLAS needs OpenBLAS's headers: apt-get install libopenblas-dev" >&2
  exit 1
fi
g++ "${flags[@]}" -I"$here" -Wl,-soname,libcublas.so.12 \
  -Wl,--version-script="$here/cublas.map" -o "$out/libcublas.so.12.tmp" \
  "$here/cublas_emulator.cpp" -L"$out" -l:libcuda.so.1 -lopenblas -Wl,-z,defs -Wl,-rpath,'$ORIGIN'
mv "$out/libcublas.so.12.tmp" "$out/libcublas.so.12"
