#!/usr/bin/env bash
# Offloaded vs resident training steps on the CPU backend (OffloadBench): a model RATIO times larger
# than the device budget, the plan's placement, the same batches; step-time ratio, loss curves,
# per-step copy/overlap figures. BUS_GBPS > 0 adds a simulated host-device bus to the copies.
# CLIP > 0: clipped at that norm, the offloaded run's serial and speculative host updates side by
# side (ramtrain.offload.clip-update) and the delayed one (from step 2), with each one's exposed
# host-update time and loss curve.
# Usage: benchmarks/offload.sh [spec] [batch=128] [threads=2] [ratio=4] [rounds=3] [steps=10] [bus_gbps=0] [bf16=false] [delayed=false] [clip=0]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPEC="${1:-mlp:1024-2048-2048-2048-2048-2048-2048-2048-2048-10}"
BATCH="${2:-128}"
THREADS="${3:-2}"
RATIO="${4:-4}"
ROUNDS="${5:-3}"
STEPS="${6:-10}"
BUS="${7:-0}"
BF16="${8:-false}"
DELAYED="${9:-false}"
CLIP="${10:-0}"
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/offload.txt"
echo "# $(date -u +%FT%TZ) $(nproc) cores" | tee "$OUT"
# shellcheck disable=SC2086
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE java $FLAGS -cp "$CP" dev.ramtrain.bench.OffloadBench \
  "$SPEC" "$BATCH" "$THREADS" "$RATIO" "$ROUNDS" "$STEPS" "$BUS" "$BF16" "$DELAYED" "$CLIP" 2>/dev/null | tee -a "$OUT"
