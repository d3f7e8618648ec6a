#!/usr/bin/env bash
# ETL benchmark, side by side with ../shared/anchors (results go to benchmarks/RESULTS.md by hand):
#   1. decode + resize (+ random resized crop 224 + flip) images/s on one core, ramtrain vs
#      PIL/torchvision (torch_loader_bench.py), interleaved A B A B;
#   2. bytes copied per sample by the shard reader vs Arrow's own ArrowFileReader;
#   3. preprocess rows/s end to end through Spark on all cores (local[*]), with the run's own
#      breakdown (driver phases, Spark stages, the shard tasks' read / decode / append split).
# Two image sets: the anchors' synthetic 320x240 set (make_jpegs.py) and 500x375 crops of real
# photographs from Debian packages (benchmarks/make_photos.py); 1 and 3 run on both.
# Needs: apt-get install python3-torch python3-torchvision python3-pil python3-numpy
#   mate-backgrounds plasma-workspace-wallpapers (the photographs)
# Usage: benchmarks/etl.sh [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ANCHORS="${ANCHORS:-$ROOT/../shared/anchors}"
ROUNDS="${1:-2}"
SYNTHETIC=/tmp/ramtrain-anchor-jpegs
PHOTOS=/tmp/ramtrain-photo-jpegs
OUT="$ROOT/benchmarks/out"
mkdir -p "$OUT"

[ -d "$SYNTHETIC" ] || /usr/bin/python3 "$ANCHORS/make_jpegs.py" --out "$SYNTHETIC"
[ -d "$PHOTOS" ] || /usr/bin/python3 "$ROOT/benchmarks/make_photos.py" --out "$PHOTOS"
# Build first, so no timed command below includes a build.
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"

{
  echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "# java: $(java -version 2>&1 | head -n 1)"
} | tee "$OUT/etl.txt"
for JPEGS in "$SYNTHETIC" "$PHOTOS"; do
  for round in $(seq "$ROUNDS"); do
    echo "## $(basename "$JPEGS"), round $round: ramtrain (1 core)" | tee -a "$OUT/etl.txt"
    # shellcheck disable=SC2086
    taskset -c 0 java $FLAGS -XX:ActiveProcessorCount=1 -cp "$CP" dev.ramtrain.bench.DecodeBench "$JPEGS" 3 | tee -a "$OUT/etl.txt"
    echo "## $(basename "$JPEGS"), round $round: PIL / torchvision anchor" | tee -a "$OUT/etl.txt"
    /usr/bin/python3 "$ANCHORS/torch_loader_bench.py" --root "$JPEGS" --reps 3 --workers 0,2 | tee -a "$OUT/etl.txt"
  done
done

echo "## shard reader: bytes copied per sample" | tee -a "$OUT/etl.txt"
# shellcheck disable=SC2086
java $FLAGS -cp "$CP" dev.ramtrain.bench.ShardReadBench /tmp/ramtrain-shard-bench 4 2000 5 | tee -a "$OUT/etl.txt"

# 20,000 inputs: each set hard-linked ten times, so fixed costs (JVM, Spark, JIT) do not dominate.
for JPEGS in "$SYNTHETIC" "$PHOTOS"; do
  X10="$JPEGS-x10"
  if [ ! -d "$X10" ]; then
    for k in $(seq 0 9); do
      for dir in "$JPEGS"/class_*; do
        mkdir -p "$X10/$(basename "$dir")"
        for f in "$dir"/*.jpg; do ln "$f" "$X10/$(basename "$dir")/r${k}_$(basename "$f")"; done
      done
    done
  fi
  echo "## $(basename "$JPEGS"): preprocess end to end through Spark (local[*]), 20,000 inputs, 64x64 and 224x224" | tee -a "$OUT/etl.txt"
  for size in 64 224; do
    start=$(date +%s.%N)
    "$ROOT/bin/ramtrain" preprocess -i "$X10" -o "/tmp/ramtrain-bench-ds-$size" --height "$size" --width "$size" \
      --overwrite --set ramtrain.etl.max-reject-fraction=0 2>&1 | grep -E "^(dataset|preprocessed|time) |^  (stage|shard)" | tee -a "$OUT/etl.txt"
    echo "wall seconds (JVM + Spark start included) for ${size}x${size}: $(echo "$(date +%s.%N) - $start" | bc)" | tee -a "$OUT/etl.txt"
  done
done
