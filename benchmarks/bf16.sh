#!/usr/bin/env bash
# precision=bf16 against ramtrain's own fp32 step on the CPU backend: the same model, batch and
# threads, resident training steps on random 224x224 batches, fp32 and bf16 interleaved A B A B.
# bf16 runs bf16 kernels (oneDNN's matmul on AVX512-BF16/AMX) only where the CPU has them; the first
# line says which ISA oneDNN found (ONEDNN_MAX_CPU_ISA lowers it, as on a CPU without).
# Usage: benchmarks/bf16.sh [spec=vit_base_patch16_224] [batch=8] [threads=2] [steps=4] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPEC="${1:-vit_base_patch16_224}"
BATCH="${2:-8}"
THREADS="${3:-2}"
STEPS="${4:-4}"
ROUNDS="${5:-2}"
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true package
CP="$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/bf16-$SPEC.txt"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)," \
  "bf16 flags: $(grep -m1 -o 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | xargs)," \
  "ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-unset}" | tee "$OUT"
for round in $(seq "$ROUNDS"); do
  for precision in fp32 bf16; do
    # shellcheck disable=SC2086
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE java $FLAGS -cp "$CP" dev.ramtrain.bench.ModelBench \
      "$SPEC" 224 224 "$BATCH" "$THREADS" "$STEPS" "$precision" 2>/dev/null | tee -a "$OUT"
  done
done
