#!/usr/bin/env bash
# Rebuilds the fatbin the CUDA backend loads, and the digest of the sources it was built from
# (KernelSourcesTest fails when the committed fatbin is stale). Run after changing any .cu/.cuh:
#   bash trainer/src/main/cuda/build-fatbin.sh
# SASS for Turing to Hopper, and PTX for the newest so later GPUs JIT it. No FMA contraction:
# the elementwise kernels then give the CPU backend's bits (the GEMM asks for fmaf itself).
# Committed (3 MB) because a build must work without nvcc; left uncompressed (--compress-mode
# would make it 0.4 MB) so that KernelSourcesTest can see every kernel and target in it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/../resources/dev/ramtrain/trainer/backend/cuda"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda-13.0/bin/nvcc)}"
mkdir -p "$out"
"$nvcc" -fatbin -O3 -fmad=false -std=c++17 \
  -gencode arch=compute_75,code=sm_75 \
  -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_86,code=sm_86 \
  -gencode arch=compute_89,code=sm_89 \
  -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90 \
  -o "$out/kernels.fatbin" "$here/kernels.cu"
bash "$here/sources-digest.sh" >"$out/kernels.sources.sha256"
echo "wrote $out/kernels.fatbin ($(stat -c %s "$out/kernels.fatbin") bytes) with $("$nvcc" --version | tail -n 2 | head -n 1)"
