#!/usr/bin/env bash
# What a session runs on a lent GPU machine (only an NVIDIA driver and PyTorch there), in one call
# and under ten minutes: the CUDA tests on the real device, then the ImageNet models' resident steps
# beside PyTorch's (device peak against max_memory_allocated, step time, same batch, fp32), then
# GpuBench's resident against streamed ViT-L/16 and ConvNeXt-L. Each part has its own time limit, so
# a slow one leaves the others their turn; every log lands in OUT_DIR.
# Made here: bash benchmarks/gpu/bundle.sh --tests .gpu/bundle && tar -C .gpu -cJf .gpu/bundle.tar.xz bundle
# Run there: benchmarks/gpu/lent.sh .gpu/bundle.tar.xz "$OUT" [BATCH=32]
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAR="$1"
LOGS="$2"
BATCH="${3:-32}"
WORK="$(mktemp -d)"
tar -C "$WORK" -xJf "$TAR"
RUN="$WORK/bundle/run.sh"
part() { # part LOG SECONDS COMMAND...: one time-limited step, appended to LOG (at most 8 files
  local log="$1" limit="$2" # come back from a lent machine)
  shift 2
  echo "== $* (limit ${limit}s) $(date -u +%T)" | tee -a "$LOGS/summary.txt" >>"$LOGS/$log.log"
  timeout "$limit" "$@" >>"$LOGS/$log.log" 2>&1
  echo "   exit $? $(date -u +%T)" | tee -a "$LOGS/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/summary.txt"
part tests 150 "$RUN" tests
grep -E "tests (successful|failed)|✘" "$LOGS/tests.log" | head -20 | tee -a "$LOGS/summary.txt"
# ramtrain's resident steps and PyTorch's, the same models, batch and arithmetic (fp32, no TF32).
for m in resnet50 vit_base_patch16_224 convnext_tiny vit_large_patch16_224 convnext_large; do
  part memory 60 "$RUN" memory "$m" "$BATCH" 4
done
grep -h "^memory" "$LOGS/memory.log" | tee -a "$LOGS/summary.txt"
part torch 90 python3 "$HERE/torch_anchor.py" "$BATCH" resnet50 vit_b_16 convnext_tiny vit_l_16 convnext_large
grep -h "^pytorch" "$LOGS/torch.log" | tee -a "$LOGS/summary.txt"
for m in vit_large_patch16_224 convnext_large; do
  part bench 90 "$RUN" "$m" 2048 5 4
done
grep -h -E "^(model|batch|  streamed)" "$LOGS/bench.log" | tee -a "$LOGS/summary.txt"
