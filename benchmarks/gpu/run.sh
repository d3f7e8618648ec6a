#!/usr/bin/env bash
# Runs GpuBench from the bundle benchmarks/gpu/bundle.sh made: only an NVIDIA driver is needed.
# Usage: bundle/run.sh [SPEC [GEMM_N [STEPS [RATIO]]]]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$HERE/runtime/bin/java" --add-opens=java.base/java.nio=ALL-UNNAMED \
  -Dorg.slf4j.simpleLogger.showDateTime=true \
  -cp "$HERE/lib/*" dev.ramtrain.bench.GpuBench "$@"
