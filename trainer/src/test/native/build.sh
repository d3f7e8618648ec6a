#!/usr/bin/env bash
# Builds the CUDA emulator the tests run the CUDA backend on (see README.md beside this file):
#   OUT/libcuda.so.1        the driver, with the project's kernels (trainer/src/main/cuda) compiled in
#   OUT/libcublas.so.13     the cuBLAS calls the backend makes, over Debian's OpenBLAS
#   OUT/libcudnn_*.so.9     the cuDNN calls (graph, ops, cnn, adv), over the same
#   OUT/libcublasLt.so.13, OUT/libcudart.so.13  what JavaCPP's wrappers link and the backend never calls
# Each with the soname and symbol version of NVIDIA's library, so JavaCPP's JNI wrappers load them.
# Called by the trainer module's build (generate-test-resources); needs g++ and libopenblas-dev.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT_DIR}"
cuda="$here/../../main/cuda"
mkdir -p "$out"
libraries=(libcuda.so.1 libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libcudnn_graph.so.9
  libcudnn_ops.so.9 libcudnn_cnn.so.9 libcudnn_adv.so.9)
# Up to date: every library newer than every source it is built from.
newest_source=$(ls -t "$here"/* "$cuda"/*.cu "$cuda"/*.cuh | head -n 1)
stale=false
for library in "${libraries[@]}"; do
  [ "$out/$library" -nt "$newest_source" ] || stale=true
done
$stale || exit 0
if [ ! -e /usr/include/x86_64-linux-gnu/cblas.h ] && [ ! -e /usr/include/cblas.h ] \
  && ! ls /usr/include/x86_64-linux-gnu/openblas*/cblas.h >/dev/null 2>&1; then
  echo "build.sh: the emulated cuBLAS and cuDNN need OpenBLAS's headers: apt-get install libopenblas-dev" >&2
  exit 1
fi
flags=(-std=c++17 -O2 -fPIC -shared -pthread -ffp-contract=off -fvisibility=hidden
  -Wall -Wno-unused-function)
# library SONAME SOURCE [g++ arguments...]: one library, written whole or not at all.
library() {
  local soname="$1" source="$2"
  shift 2
  g++ "${flags[@]}" -I"$here" -Wl,-soname,"$soname" -o "$out/$soname.tmp" "$source" "$@"
  mv "$out/$soname.tmp" "$out/$soname"
}
library libcuda.so.1 "$here/cuda_emulator.cpp" -DRAMTRAIN_EMULATOR -I"$cuda" \
  -include "$here/cuda_shim.h" -x c++ "$cuda/kernels.cu"
# A machine with the driver alone (CudaWithoutLibrariesTest): the same driver, no libraries beside.
mkdir -p "$out/driver-only"
ln -sf ../libcuda.so.1 "$out/driver-only/libcuda.so.1"
library libcudart.so.13 "$here/cudart_emulator.cpp" \
  -Wl,--version-script=<(printf 'libcudart.so.13 { global: cuda*; local: *; };\n')
library libcublasLt.so.13 "$here/cublaslt_emulator.cpp" \
  -Wl,--version-script=<(printf 'libcublasLt.so.13 { global: cublasLt*; local: *; };\n')
linked=(-L"$out" -l:libcuda.so.1 -lopenblas -Wl,-z,defs -Wl,-rpath,'$ORIGIN')
library libcublas.so.13 "$here/cublas_emulator.cpp" -Wl,--version-script="$here/cublas.map" "${linked[@]}"
for part in graph ops cnn adv; do
  library "libcudnn_$part.so.9" "$here/cudnn_emulator.cpp" \
    -Wl,--version-script="$here/cudnn_$part.map" "${linked[@]}"
done
