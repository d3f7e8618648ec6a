#!/usr/bin/env bash
# Builds benchmarks/gpu/bundle/: everything GpuBench needs on a machine that has an NVIDIA driver
# and nothing else (no Java, no network): a jlink'd Java runtime, the trainer's jars (no Spark, no
# OpenBLAS) and run.sh. Copy the folder there and run bundle/run.sh. Kept under 60 MiB.
# With --tests it also carries the CUDA backend's test classes, OpenBLAS (their CPU reference) and
# JUnit's console launcher, so `bundle/run.sh tests` runs them on the real GPU (about 80 MiB).
# Needs zip (the natives left out are deleted from copies of their jars).
# Usage: benchmarks/gpu/bundle.sh [--tests] [OUT=benchmarks/gpu/bundle]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESTS=false
if [ "${1:-}" = --tests ]; then
  TESTS=true
  shift
fi
OUT="$(realpath -m "${1:-$ROOT/benchmarks/gpu/bundle}")"
MARK="$OUT/.ramtrain-gpu-bundle" # what this script wrote: the only folder it will ever delete
# Checked before anything else (GpuBundleScriptIT): a folder not made here is never touched.
if [ -e "$OUT" ] && [ ! -e "$MARK" ]; then
  echo "bundle.sh: $OUT exists and was not made by this script; move it away first" >&2
  exit 1
fi
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true install
rm -rf "$OUT"
mkdir -p "$OUT/lib"
touch "$MARK"
CP="$(mktemp)"
trap 'rm -f "$CP"' EXIT
mvn -q -B -f "$ROOT/trainer/pom.xml" dependency:build-classpath -Dmdep.includeScope=runtime \
  -Dmdep.outputFile="$CP" >/dev/null
# Not needed by the GPU bench: the CPU backend's BLAS and oneDNN (the CUDA tests' CPU reference is
# the Java engine; without oneDNN's natives `auto` falls back to it), and what the build scopes too
# widely. JavaCPP itself stays: the CUDA presets' wrappers load through it.
if $TESTS; then
  SKIP='/(dnnl|opencl|junit|jqwik|opentest4j|apiguardian|log4j)[-.]'
else
  SKIP='/(openblas|dnnl|opencl|junit|jqwik|opentest4j|apiguardian|log4j)[-.]'
fi
tr ':' '\n' <"$CP" | grep -v -E "$SKIP" | while read -r jar; do cp "$jar" "$OUT/lib/"; done
# Natives nothing here loads (the PTX compiler; OpenBLAS's LAPACK builds and headers: the CPU
# backend binds openblas_nolapack), so the bundle travels to a lent machine under its 64 MiB.
zip -q -d "$OUT"/lib/jcuda-natives-*.jar '*JNvPTXCompiler*'
# Of JavaCPP's CUDA wrappers, the three the engine loads (cudart's, which cuBLAS's and cuDNN's
# extend, cuBLAS's, cuDNN's); NVIDIA's libraries themselves come from the GPU machine.
zip -q -d "$OUT"/lib/cuda-*-linux-x86_64.jar $(unzip -Z1 "$OUT"/lib/cuda-*-linux-x86_64.jar '*.so' |
  grep -v -E '/libjni(cudart|cublas|cudnn)\.so$')
if $TESTS; then
  zip -q -d "$OUT"/lib/openblas-*-linux-x86_64.jar '*/libjniopenblas.so' '*/libjniopenblas_full.so' '*/include/*'
fi
if $TESTS; then
  mvn -q -B -f "$ROOT/pom.xml" -N dependency:copy \
    -Dartifact=org.junit.platform:junit-platform-console-standalone:1.14.1 \
    -DoutputDirectory="$OUT/lib" >/dev/null
  # The PyTorch goldens stay files (the tests open them by path), on the class path beside the jar.
  (cd "$ROOT/trainer/target/test-classes" && jar cf "$OUT/lib/ramtrain-trainer-tests.jar" $(ls | grep -v -x goldens))
  mkdir -p "$OUT/test-resources"
  cp -r "$ROOT/trainer/target/test-classes/goldens" "$OUT/test-resources/"
fi
# SLF4J's simple logger (log4j-core would need java.desktop): INFO lines on stderr.
mvn -q -B -f "$ROOT/pom.xml" -N dependency:copy -Dartifact=org.slf4j:slf4j-simple:2.0.16 \
  -DoutputDirectory="$OUT/lib" >/dev/null
cp "$ROOT"/trainer/target/ramtrain-trainer-*.jar "$ROOT"/etl/format/target/ramtrain-format-*.jar "$OUT/lib/"
(cd "$ROOT/benchmarks/target/classes" && jar cf "$OUT/lib/ramtrain-gpu-bench.jar" dev/ramtrain/bench/GpuBench*.class dev/ramtrain/bench/TrainingSteps*.class dev/ramtrain/bench/AdamWBench*.class \
  dev/ramtrain/bench/OperationTimes*.class)
# The Java modules the trainer's code paths use (what jdeps lists for the jars, less java.desktop,
# which only log4j, left out, would need).
MODULES=java.base,java.logging,java.management,java.naming,java.sql,jdk.management,jdk.unsupported
if $TESTS; then
  MODULES="$MODULES,java.xml" # JUnit's console launcher writes its report with StAX
fi
jlink --add-modules "$MODULES" --strip-debug --no-header-files --no-man-pages --compress=2 --output "$OUT/runtime"
cp "$ROOT/benchmarks/gpu/run.sh" "$OUT/run.sh"
echo "bundle: $OUT ($(du -sh "$OUT" | cut -f1); modules $MODULES)"
