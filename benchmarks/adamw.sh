#!/usr/bin/env bash
# Host AdamW step per parameter: ramtrain's host optimizer (AdamWBench: fp32 and bf16 moments, with and
# without the bf16 weight copy, beside STREAM's triad on the same threads) and torch.optim.AdamW on CPU
# (benchmarks/adamw_torch.py), interleaved A B A B. Needs: apt-get install python3-torch
# Usage: benchmarks/adamw.sh [params=20000000] [threads=2] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PARAMS="${1:-20000000}"
THREADS="${2:-2}"
ROUNDS="${3:-2}"
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/adamw.txt"
echo "# $(date -u +%FT%TZ) $(nproc) cores; AdamW over $PARAMS fp32 parameters, $THREADS threads" | tee "$OUT"
for round in $(seq "$ROUNDS"); do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$ROOT/benchmarks/adamw_torch.py" \
    --params "$PARAMS" --threads "$THREADS" --steps 10 | tee -a "$OUT"
  # shellcheck disable=SC2086
  java $FLAGS -cp "$CP" dev.ramtrain.bench.AdamWBench "$PARAMS" "$THREADS" 10 2>/dev/null \
    | grep '"impl"' | tee -a "$OUT"
done
