#!/usr/bin/env bash
# Runs GpuBench from the bundle benchmarks/gpu/bundle.sh made: only an NVIDIA driver is needed.
# `run.sh tests` instead runs the CUDA backend's tests on the real GPU (a bundle made with --tests):
# the conformance suite, bit-equality with the CPU backend, offloaded and data-parallel training,
# the PyTorch goldens (ViT, ResNet, ConvNeXt).
# A timm-named SPEC (vit_large_patch16_224, convnext_large) runs at its 224x224 pretraining size.
# `run.sh memory SPEC BATCH STEPS [MODES]`: resident steps, device peak beside the plan, in fp32,
# tf32 and/or bf16 (torch_anchor.py's modes); `run.sh gemm N...`: GEMM TFLOP/s through the engine;
# `run.sh ops SPEC BATCH STEPS [MODE]`: a resident step's device time by operation type;
# `run.sh adamw PARAMS THREADS STEPS`: the host AdamW (fp32 and bf16 moments) beside STREAM's triad.
# NVIDIA's libraries (cuBLAS 13, cuDNN 9) come from LD_LIBRARY_PATH or, as bin/ramtrain finds them,
# from a PyTorch install's site-packages/nvidia/*/lib; without them the engine runs its own kernels.
# Usage: bundle/run.sh [SPEC [GEMM_N [STEPS [RATIO]]]] | bundle/run.sh memory SPEC BATCH STEPS [MODES]
#        | bundle/run.sh gemm N... | bundle/run.sh ops SPEC BATCH STEPS [MODE] | bundle/run.sh tests
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for python in python3 python; do
  command -v "$python" >/dev/null 2>&1 || continue
  pip_nvidia="$("$python" -c 'import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
print(":".join(sorted({d for r in roots for d in glob.glob(os.path.join(r, "nvidia", "*", "lib"))})))' 2>/dev/null || true)"
  [ -n "$pip_nvidia" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$pip_nvidia"
  break
done
JAVA=("$HERE/runtime/bin/java" --add-opens=java.base/java.nio=ALL-UNNAMED
  -Dorg.slf4j.simpleLogger.showDateTime=true)
if [ "${1:-}" = tests ]; then
  # The offload suite asks the emulator for a slow bus through this file; a real driver ignores it.
  exec "${JAVA[@]}" -Dramtrain.cuda.emulator.faults="${TMPDIR:-/tmp}/ramtrain-emulator-faults.conf" -jar "$HERE"/lib/junit-platform-console-standalone-*.jar execute \
    --class-path "$(printf '%s:' "$HERE"/lib/*.jar)$HERE/test-resources" --disable-banner --details=tree \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaBackendKernelsTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaBackendLibrariesTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaLibrariesPyTorchGoldenTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaMatchesCpuTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaOffloadedTrainingTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaPyTorchGoldenTest \
    --select-method dev.ramtrain.trainer.TrainerTest#theCudaBackendTrainsAsTheCpuBackendDoes \
    --select-method dev.ramtrain.trainer.TrainerTest#bf16PrecisionTrainsOnBothBackendsAndOffloaded \
    --select-class dev.ramtrain.trainer.DataParallelTrainingTest
fi
if [ "${1:-}" = adamw ]; then # the host AdamW per parameter on this host's cores (issue 43)
  shift
  exec "${JAVA[@]}" -cp "$HERE/lib/*" dev.ramtrain.bench.AdamWBench "$@"
fi
exec "${JAVA[@]}" -cp "$HERE/lib/*" dev.ramtrain.bench.GpuBench "$@"
