#!/usr/bin/env bash
# Training throughput and accuracy side by side with ../shared/anchors/pytorch_fmnist.py
# (interleaved A B A B, same environment for both).
# Needs: apt-get install python3-torch python3-numpy dataset-fashion-mnist libopenblas0-pthread time
#   (without libopenblas0-pthread Debian's torch runs on netlib's reference BLAS, ~7 GFLOP/s here).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for both sides, as ../shared/anchors/README.md does,
# unless CPU_PATH asks for another CPU's code paths, on both sides alike:
#   CPU_PATH=avx512 OpenBLAS's SkylakeX kernels, oneDNN's AVX-512 ones (an AVX-512 Intel Xeon)
#   CPU_PATH=avx2   OpenBLAS's Zen kernels, oneDNN and ATen limited to AVX2 (an AMD Zen 2/3 EPYC)
# Usage: [CPU_PATH=avx512|avx2] benchmarks/train.sh [model=mlp] [epochs=1] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ANCHORS="${ANCHORS:-$ROOT/../shared/anchors}"
MODEL="${1:-mlp}"
EPOCHS="${2:-1}"
ROUNDS="${3:-2}"
DATA=/tmp/ramtrain-fmnist
case "$MODEL" in
  mlp) SPEC="mlp:784-1024-1024-10"; BATCH=256 ;;
  cnn) SPEC="cnn:c32-p-c64-p-f128-10"; BATCH=128 ;;
  resnet20) SPEC="resnet:20-10"; BATCH=128 ;;
  *) echo "model $MODEL: mlp, cnn or resnet20" >&2; exit 2 ;;
esac
PATH_ENV=(-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u ONEDNN_MAX_CPU_ISA -u ATEN_CPU_CAPABILITY)
case "${CPU_PATH:-native}" in
  native) ;;
  avx512) PATH_ENV+=(OPENBLAS_CORETYPE=SkylakeX ONEDNN_MAX_CPU_ISA=AVX512_CORE ATEN_CPU_CAPABILITY=avx512) ;;
  avx2) PATH_ENV+=(OPENBLAS_CORETYPE=Zen ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2) ;;
  *) echo "CPU_PATH $CPU_PATH: native, avx512 or avx2" >&2; exit 2 ;;
esac
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/train-$MODEL-${CPU_PATH:-native}.txt"
RSS="$(mktemp)" # peak resident set size of each run, from GNU time (KiB)
trap 'rm -f "$RSS"' EXIT
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
[ -f "$DATA/manifest.json" ] || "$ROOT/bin/ramtrain" preprocess -i /usr/share/datasets/fashion-mnist -o "$DATA" \
  --height 28 --width 28 --color grayscale --resize stretch \
  --set ramtrain.source.class-names=tshirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), code paths ${CPU_PATH:-native}; model $MODEL, $EPOCHS epoch(s), batch $BATCH, AdamW lr 1e-3 wd 0.01, 2 threads" | tee "$OUT"
for round in $(seq "$ROUNDS"); do
  echo "## round $round: pytorch" | tee -a "$OUT"
  /usr/bin/time -f "%M" -o "$RSS" env "${PATH_ENV[@]}" /usr/bin/python3 "$ANCHORS/pytorch_fmnist.py" --model "$MODEL" \
    --epochs "$EPOCHS" --batch-size "$BATCH" --threads 2 --seed "$round" 2>/dev/null | tail -n 1 | tee -a "$OUT"
  echo "peak RSS $(( $(tail -n 1 "$RSS") / 1024 )) MiB" | tee -a "$OUT"
  echo "## round $round: ramtrain" | tee -a "$OUT"
  RUN="$(mktemp -d)/run" # a new run directory each round: train refuses to write over a run
  /usr/bin/time -f "%M" -o "$RSS" env "${PATH_ENV[@]}" "$ROOT/bin/ramtrain" train -d "$DATA" -o "$RUN" \
    --model "$SPEC" --epochs "$EPOCHS" --batch-size "$BATCH" --seed "$round" --set ramtrain.train.threads=2 2>&1 \
    | grep -E "epoch [0-9]+/[0-9]+: train|val accuracy" | tee -a "$OUT"
  echo "peak RSS $(( $(tail -n 1 "$RSS") / 1024 )) MiB" | tee -a "$OUT"
done
