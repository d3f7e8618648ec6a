#!/usr/bin/env bash
# Runs GpuBench from the bundle benchmarks/gpu/bundle.sh made: only an NVIDIA driver is needed.
# `run.sh tests` instead runs the CUDA backend's tests on the real GPU (a bundle made with --tests):
# the conformance suite, bit-equality with the CPU backend, offloaded and data-parallel training,
# the PyTorch goldens (ViT, ResNet, ConvNeXt).
# A timm-named SPEC (vit_large_patch16_224, convnext_large) runs at its 224x224 pretraining size.
# `run.sh memory SPEC BATCH STEPS`: resident steps, device peak beside the plan (torch_anchor.py's).
# Usage: bundle/run.sh [SPEC [GEMM_N [STEPS [RATIO]]]] | bundle/run.sh memory SPEC BATCH STEPS | bundle/run.sh tests
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAVA=("$HERE/runtime/bin/java" --add-opens=java.base/java.nio=ALL-UNNAMED
  -Dorg.slf4j.simpleLogger.showDateTime=true)
if [ "${1:-}" = tests ]; then
  # The offload suite asks the emulator for a slow bus through this file; a real driver ignores it.
  exec "${JAVA[@]}" -Dramtrain.cuda.emulator.faults="${TMPDIR:-/tmp}/ramtrain-emulator-faults.conf" -jar "$HERE"/lib/junit-platform-console-standalone-*.jar execute \
    --class-path "$(printf '%s:' "$HERE"/lib/*.jar)$HERE/test-resources" --disable-banner --details=tree \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaBackendKernelsTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaMatchesCpuTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaOffloadedTrainingTest \
    --select-class dev.ramtrain.trainer.backend.cuda.CudaPyTorchGoldenTest \
    --select-method dev.ramtrain.trainer.TrainerTest#theCudaBackendTrainsAsTheCpuBackendDoes \
    --select-method dev.ramtrain.trainer.TrainerTest#bf16PrecisionTrainsOnBothBackendsAndOffloaded \
    --select-class dev.ramtrain.trainer.DataParallelTrainingTest
fi
exec "${JAVA[@]}" -cp "$HERE/lib/*" dev.ramtrain.bench.GpuBench "$@"
