#!/usr/bin/env bash
# Data-parallel training on this machine (issue 14), each figure beside its anchor in one run:
#   1. the ring all-reduce on loopback against a plain socket copy of the same bytes
#      (AllReduceBench: bus bandwidth, NCCL's measure);
#   2. Fashion-MNIST, one epoch of mlp:784-1024-1024-10 at a global batch of 256, interleaved:
#      one process on 1 thread, one process on 2 threads, and 2 ranks of 1 thread each in a Spark
#      barrier stage (train --ranks 2 --master local[2]); samples/s from each run's metrics.
# Usage: benchmarks/dist.sh [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
DATA=/tmp/ramtrain-fmnist
OUT="$ROOT/benchmarks/out/dist.txt"
mkdir -p "$ROOT/benchmarks/out"
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
[ -f "$DATA/manifest.json" ] || "$ROOT/bin/ramtrain" preprocess -i /usr/share/datasets/fashion-mnist -o "$DATA" \
  --height 28 --width 28 --color grayscale --resize stretch \
  --set ramtrain.source.class-names=tshirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" | tee "$OUT"
echo "## all-reduce vs socket copy, loopback (2 ranks, then 3 on 2 cores)" | tee -a "$OUT"
# shellcheck disable=SC2086
java $FLAGS -cp "$CP" dev.ramtrain.bench.AllReduceBench 2 4,64,256 5 | tee -a "$OUT"
# shellcheck disable=SC2086
java $FLAGS -cp "$CP" dev.ramtrain.bench.AllReduceBench 3 64 5 | tee -a "$OUT"

train() { # label, extra flags...
  local label="$1"
  shift
  local run
  run="$(mktemp -d)/run"
  "$ROOT/bin/ramtrain" train -d "$DATA" -o "$run" --model mlp:784-1024-1024-10 --epochs 1 \
    --batch-size 256 --set ramtrain.train.backend=cpu "$@" > /dev/null 2>&1
  echo "$label: $(grep '"type":"epoch"' "$run/metrics.jsonl" | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/') samples/s" \
    | tee -a "$OUT"
  rm -rf "$(dirname "$run")"
}
echo "## Fashion-MNIST, mlp:784-1024-1024-10, global batch 256, one epoch" | tee -a "$OUT"
for round in $(seq "$ROUNDS"); do
  train "round $round, 1 process, 1 thread" --set ramtrain.train.threads=1
  train "round $round, 1 process, 2 threads" --set ramtrain.train.threads=2
  train "round $round, 2 ranks x 1 thread" --set ramtrain.train.threads=1 --ranks 2 --master 'local[2]'
done
