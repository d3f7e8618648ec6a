#!/usr/bin/env bash
# ZeRO on resident ranks (issue 43): two ranks with devices of their own (the cpu backend's device
# instances in one Spark JVM, --ranks 2 --master local[2], ramtrain.dist.devices-per-node = 1), the
# model resident on each, trained with ramtrain.dist.zero = 0, 1 and 2, interleaved A B C A B C:
#   A  ZeRO off: each device keeps all of AdamW's moments (8 bytes a parameter)
#   B  ZeRO-1: each keeps its half's moments; the share reduce-scattered after backward
#   C  ZeRO-2: the same moments; each 25 MB bucket reduced to its owners during backward
# Peak RSS (the cpu backend's device memory is the host's) and samples/s (2 cores: the ranks share
# them). Expected: B and C below A by the other rank's half of the moments on each device, 2 x 4
# bytes x the parameters in all; the same weights (each run prints its final digest). The heap is
# fixed at 4 GiB in every run (at 2 GiB, as benchmarks/node.sh, two ranks' checkpoint snapshots of
# 3 x 277 MB arrays each ran out of heap in one ZeRO-1 run of two). Peak RSS swings with the heap's
# growth by more than the moments ZeRO saves; DataParallelTrainingTest counts those to the byte.
# Usage: benchmarks/zero.sh [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
OUT="$ROOT/benchmarks/out/zero.txt"
mkdir -p "$ROOT/benchmarks/out"
# bin/ramtrain builds the jars first where they are missing or older than the sources
"$ROOT/bin/ramtrain" generate -o "$WORK/images" --classes 4 --images-per-class 48 --width 32 --height 32 > /dev/null
"$ROOT/bin/ramtrain" preprocess -i "$WORK/images" -o "$WORK/data" --height 32 --width 32 > /dev/null 2>&1
echo "# $(date -u +%FT%TZ) $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(java -version 2>&1 | head -n 1)" | tee "$OUT"
MODEL=mlp:3072-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-4
run() { # label, zero stage
  local label="$1" dir="$WORK/run-$RANDOM"
  /usr/bin/time -f "%M %e" -o "$WORK/time" "$ROOT/bin/ramtrain" train -d "$WORK/data" -o "$dir" \
    --driver-memory 4g --model "$MODEL" --epochs 1 --batch-size 16 --offload off \
    --ranks 2 --master 'local[2]' --set ramtrain.dist.devices-per-node=1 \
    --set ramtrain.train.backend=cpu --set ramtrain.dist.zero="$2" > "$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
  read -r rss wall < "$WORK/time"
  local rate digest
  rate="$(grep '"type":"epoch"' "$dir/metrics.jsonl" | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/')"
  digest="$(grep -o 'sha256:[0-9a-f]\{12\}' "$WORK/log" | head -n 1)"
  printf '%s: peak RSS %d MiB, %.1f s, %s samples/s, weights %s\n' "$label" $((rss / 1024)) "$wall" "$rate" "$digest" | tee -a "$OUT"
  rm -rf "$dir"
}
echo "## $MODEL (69 M parameters), resident, batch 16 (8 a rank), 2 ranks" | tee -a "$OUT"
for round in $(seq "$ROUNDS"); do
  run "round $round, A ZeRO off" 0
  run "round $round, B ZeRO-1" 1
  run "round $round, C ZeRO-2" 2
done
