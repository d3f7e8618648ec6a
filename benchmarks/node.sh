#!/usr/bin/env bash
# One host copy for a node's devices (issue 43): peak RSS of `train --offload on` for a model whose
# host copy dominates (an MLP of 69 M parameters in 17 layers, 1.0 GiB of fp32 masters, gradients and AdamW
# moments), streamed through a device budget of a quarter of its weights, on the cpu backend's
# device instances in one Spark JVM, interleaved A B C D A B C D:
#   A  1 device   (--ranks 1 --master local[1])
#   B  2 devices of one node sharing one host copy (--ranks 2 --master local[2])
#   C  2 devices with a host copy each (the same, ramtrain.dist.devices-per-node = 1)
#   D  C with ZeRO-2 (ramtrain.dist.zero = 2): each rank's copy keeps the optimizer state and
#      gradients of its half only (16 -> 10 pinned bytes a parameter, beside two landing slots)
# Target: B <= 1.1x A (beyond the second device's own device memory and staging); C about A + one
# copy. Also each run's samples/s (2 cores: the devices share them). The heap is fixed at 2 GiB
# (--driver-memory) in every run: left to the JVM's default (a quarter of the machine) its growth
# swamped the native memory compared here, by ±1 GiB from run to run.
# Usage: benchmarks/node.sh [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-2}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
OUT="$ROOT/benchmarks/out/node.txt"
mkdir -p "$ROOT/benchmarks/out"
# bin/ramtrain builds the jars first where they are missing or older than the sources
"$ROOT/bin/ramtrain" generate -o "$WORK/images" --classes 4 --images-per-class 48 --width 32 --height 32 > /dev/null
"$ROOT/bin/ramtrain" preprocess -i "$WORK/images" -o "$WORK/data" --height 32 --width 32 > /dev/null 2>&1
echo "# $(date -u +%FT%TZ) $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(java -version 2>&1 | head -n 1)" | tee "$OUT"
MODEL=mlp:3072-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-2048-4
run() { # label, flags...
  local label="$1"
  shift
  local dir="$WORK/run-$RANDOM"
  /usr/bin/time -f "%M %e" -o "$WORK/time" "$ROOT/bin/ramtrain" train -d "$WORK/data" -o "$dir" \
    --driver-memory 2g --model "$MODEL" --epochs 1 --batch-size 16 --offload on --set ramtrain.offload.budget=160MiB \
    --set ramtrain.train.backend=cpu "$@" > "$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
  read -r rss wall < "$WORK/time"
  local rate
  rate="$(grep '"type":"epoch"' "$dir/metrics.jsonl" | sed 's/.*"samples_per_s":\([0-9.]*\).*/\1/')"
  printf '%s: peak RSS %d MiB, %.1f s, %s samples/s\n' "$label" $((rss / 1024)) "$wall" "$rate" | tee -a "$OUT"
  grep -h -E '^(host pinned|node ) ' "$WORK/log" | sed 's/^/    /' | tee -a "$OUT" || true
  rm -rf "$dir"
}
echo "## $MODEL, batch 16 (8 a device with 2), streamed through 160 MiB a device" | tee -a "$OUT"
for round in $(seq "$ROUNDS"); do
  run "round $round, A 1 device" --ranks 1 --master 'local[1]'
  run "round $round, B 2 devices, one host copy" --ranks 2 --master 'local[2]'
  run "round $round, C 2 devices, a copy each" --ranks 2 --master 'local[2]' \
    --set ramtrain.dist.devices-per-node=1
  run "round $round, D 2 devices, a copy each, ZeRO-2" --ranks 2 --master 'local[2]' \
    --set ramtrain.dist.devices-per-node=1 --set ramtrain.dist.zero=2
done
