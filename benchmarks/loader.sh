#!/usr/bin/env bash
# The loader alone, side by side with torchvision (interleaved A B A B): random resized crops to
# OUT² and flips from N stored SIZE² RGB images, 2 workers, batches of 128. Anchor:
# benchmarks/loader_torch.py (RandomResizedCrop + RandomHorizontalFlip on uint8 tensors held in
# memory, torch DataLoader with 2 workers), antialiased and not; ramtrain: LoaderBench from
# memory-mapped shards into pinned staging, on preprocessing's filter (OpenCV) and on Pillow's.
# Needs: apt-get install python3-torch python3-torchvision
# Usage: benchmarks/loader.sh [n=4000] [size=256] [out=224] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-4000}"
SIZE="${2:-256}"
CROP="${3:-224}"
ROUNDS="${4:-2}"
EPOCHS=4 # the first of each is left out: workers starting, pages first touched
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true install
CP="$ROOT/trainer/target/classes:$ROOT/etl/target/classes:$ROOT/etl/format/target/classes:$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
SHARDS="$(mktemp -d)"
trap 'rm -rf "$SHARDS"' EXIT
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/loader.txt"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); $N images ${SIZE}² -> ${CROP}², batch 128, 2 workers" | tee "$OUT"
for round in $(seq "$ROUNDS"); do
  for aa in true false; do
    env -u OPENBLAS_CORETYPE /usr/bin/python3 "$ROOT/benchmarks/loader_torch.py" "$N" "$SIZE" "$CROP" 128 2 "$EPOCHS" "$aa" | tee -a "$OUT"
  done
  for filter in preprocessing pillow; do
    rm -rf "$SHARDS"/*
    # shellcheck disable=SC2086
    java $FLAGS -cp "$CP" dev.ramtrain.bench.LoaderBench "$SHARDS" "$N" "$SIZE" "$CROP" 128 2 "$EPOCHS" "$filter" 2>/dev/null | tee -a "$OUT"
  done
done
