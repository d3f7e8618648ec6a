#!/usr/bin/env bash
# What a session runs on a lent GPU machine (only an NVIDIA driver and PyTorch there: cuBLAS 13 and
# cuDNN 9 come from PyTorch's pip wheels, which bundle/run.sh finds), in one call of under ten
# minutes: GEMM TFLOP/s through the engine beside torch.matmul; the ImageNet models' resident steps
# beside PyTorch's in three rows (fp32 with TF32 off on both sides, PyTorch's defaults with TF32 in
# convolutions, bf16 autocast with channels_last on PyTorch's side), device peak against
# max_memory_allocated and the host's launch time; GpuBench's resident against streamed ViT-L/16 and
# ConvNeXt-L (a quarter of the weights' state on the device), and streamed with clip-norm 1 by the
# serial and the speculative host update (ramtrain.offload.clip-update); the host AdamW with fp32 and
# bf16 moments beside STREAM's triad on the host's cores and torch.optim.AdamW (host); then the CUDA
# tests on the real device. Each part has its own time limit, so a slow one leaves the others their turn; every log
# lands in OUT_DIR (summary.txt has the figures).
# Made here: bash benchmarks/gpu/bundle.sh --tests .gpu/bundle && tar -C .gpu -cJf .gpu/bundle.tar.xz bundle
# Run there: benchmarks/gpu/lent.sh .gpu/bundle.tar.xz "$OUT" [BATCH=32 [PARTS=gemm,steps,torch,streamed,host,tests,ops]]
# (PARTS splits the work over two calls where one would not do: gemm,steps,torch then
# streamed,host,tests,ops; ops ranks each model's operation types by device time, in fp32 and bf16, with
# the host's cost of issuing each, for what to improve)
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TAR="$1"
LOGS="$2"
BATCH="${3:-32}"
PARTS=",${4:-gemm,steps,torch,streamed,host,tests,ops},"
WORK="$(mktemp -d)"
tar -C "$WORK" -xJf "$TAR"
RUN="$WORK/bundle/run.sh"
MODELS=(resnet50 vit_base_patch16_224 convnext_tiny vit_large_patch16_224)
TORCH_MODELS=(resnet50 vit_b_16 convnext_tiny vit_l_16)
part() { # part LOG SECONDS COMMAND...: one time-limited step, appended to LOG (at most 8 files
  local log="$1" limit="$2" # come back from a lent machine)
  shift 2
  echo "== $* (limit ${limit}s) $(date -u +%T)" | tee -a "$LOGS/summary.txt" >>"$LOGS/$log.log"
  timeout "$limit" "$@" >>"$LOGS/$log.log" 2>&1
  echo "   exit $? $(date -u +%T)" | tee -a "$LOGS/summary.txt"
}
wanted() { [[ "$PARTS" == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$LOGS/summary.txt"
python3 -c 'import torch; print("pytorch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' | tee -a "$LOGS/summary.txt"
if wanted gemm; then
  part gemm 60 "$RUN" gemm 4096 8192
  part gemm 40 python3 "$HERE/torch_anchor.py" matmul 4096 8192
  grep -h -E "^(# device|GEMM|pytorch .* matmul|.*cuda backend on)" "$LOGS/gemm.log" | tee -a "$LOGS/summary.txt"
fi
if wanted steps; then # one JVM per model, its three rows in it
  for m in "${MODELS[@]}"; do
    part memory 75 "$RUN" memory "$m" "$BATCH" 5 fp32,tf32,bf16
  done
  grep -h -E "^memory|cuda: " "$LOGS/memory.log" | sort -u | tee -a "$LOGS/summary.txt"
fi
if wanted torch; then
  part torch 150 python3 "$HERE/torch_anchor.py" "$BATCH" fp32,tf32,bf16,det "${TORCH_MODELS[@]}"
  grep -h "^pytorch" "$LOGS/torch.log" | tee -a "$LOGS/summary.txt"
fi
if wanted streamed; then
  # ViT-L at batch 2 and 32 (issue 43's plan targets), ConvNeXt-L at the planned batch and a quarter
  part bench 150 "$RUN" vit_large_patch16_224 2048 5 4 2,32
  part bench 110 "$RUN" convnext_large 2048 5 4
  grep -h -E "^(model|batch|  streamed)" "$LOGS/bench.log" | tee -a "$LOGS/summary.txt" # with "  streamed, clip-norm 1"
fi
if wanted host; then # 100 M parameters (2.8 GB of fp32 state) on every core: the memory's bound
  cores="$(nproc)"
  part host 60 "$RUN" adamw 100000000 "$cores" 5
  part host 60 python3 "$HERE/../adamw_torch.py" --params 100000000 --threads "$cores" --steps 5
  grep -h -E '"impl"' "$LOGS/host.log" | tee -a "$LOGS/summary.txt"
fi
if wanted ops; then
  for mode in fp32 bf16; do
    for m in resnet50 vit_base_patch16_224 convnext_tiny; do
      part ops 60 "$RUN" ops "$m" "$BATCH" 2 "$mode"
    done
  done
  grep -h -A14 "^ops " "$LOGS/ops.log" | tee -a "$LOGS/summary.txt"
fi
if wanted tests; then
  part tests 150 "$RUN" tests
  grep -E "tests (successful|failed)|✘" "$LOGS/tests.log" | head -20 | tee -a "$LOGS/summary.txt"
fi
