#!/usr/bin/env bash
# Training steps of ImageNet-sized models on the CPU backend beside PyTorch 1.13 (torchvision's
# definitions, Debian's python3-torch), same batch and threads, random 224x224 batches, AdamW:
# samples/s and peak RSS, interleaved A B A B. Then where ramtrain's step goes, layer by layer
# (LayerTimes). Needs: apt-get install python3-torch python3-torchvision libopenblas0-pthread time
# Usage: benchmarks/models.sh [model=vit_b_16] [batch=8] [threads=2] [steps=3] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:-vit_b_16}"
BATCH="${2:-8}"
THREADS="${3:-2}"
STEPS="${4:-3}"
ROUNDS="${5:-2}"
case "$MODEL" in
  vit_b_16) SPEC="vit_base_patch16_224" ;;
  resnet50) SPEC="resnet50" ;;
  convnext_tiny) SPEC="convnext_tiny" ;;
  *) echo "model $MODEL: vit_b_16, resnet50 or convnext_tiny (torchvision's names)" >&2; exit 2 ;;
esac
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/models-$MODEL.txt"
RSS="$(mktemp)"
trap 'rm -f "$RSS"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" | tee "$OUT"
for round in $(seq "$ROUNDS"); do
  /usr/bin/time -f "%M" -o "$RSS" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 \
    "$ROOT/benchmarks/models_torch.py" --model "$MODEL" --batch "$BATCH" --threads "$THREADS" \
    --steps "$STEPS" 2>/dev/null | tee -a "$OUT"
  echo "  peak RSS $(( $(tail -n 1 "$RSS") / 1024 )) MiB" | tee -a "$OUT"
  # shellcheck disable=SC2086
  /usr/bin/time -f "%M" -o "$RSS" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE java $FLAGS -cp "$CP" \
    dev.ramtrain.bench.ModelBench "$SPEC" 224 224 "$BATCH" "$THREADS" "$STEPS" 2>/dev/null | tee -a "$OUT"
  echo "  peak RSS $(( $(tail -n 1 "$RSS") / 1024 )) MiB" | tee -a "$OUT"
done
echo "## where ramtrain's step goes (forward and backward per layer, 1 iteration)" | tee -a "$OUT"
# shellcheck disable=SC2086
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE java $FLAGS -cp "$CP" dev.ramtrain.bench.LayerTimes \
  "$SPEC" 224 224 3 "$BATCH" "$THREADS" 1 2>/dev/null | tee -a "$OUT"
