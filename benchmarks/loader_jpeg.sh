#!/usr/bin/env bash
# JPEG-column datasets: what they store and how fast the loader reads them, side by side with
# torchvision (interleaved A B A B). The real-photo set (make_photos.py --size SIZE: N photos of
# SIZE² at quality 90) is preprocessed twice at SIZE², --store raw and --store jpeg (the photos are
# already SIZE² sequential JPEGs, so the jpeg dataset keeps their bytes); then random resized crops
# to OUT² and flips, 2 workers, batches of 128: ramtrain's LoaderBench on each dataset against
# loader_jpeg_torch.py (PIL decode + RandomResizedCrop + flip on the same JPEG bytes in memory);
# the JPEG dataset also read two shards at a time, as a dataset larger than memory is.
# Needs: apt-get install python3-torch python3-torchvision mate-backgrounds
#   plasma-workspace-wallpapers
# Usage: benchmarks/loader_jpeg.sh [n=2000] [size=256] [out=224] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
N="${1:-2000}"
SIZE="${2:-256}"
CROP="${3:-224}"
ROUNDS="${4:-2}"
EPOCHS=4 # the first of each is left out: workers starting, pages first touched
mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dspotless.check.skip=true install
CP="$ROOT/trainer/target/classes:$ROOT/etl/target/classes:$ROOT/etl/format/target/classes:$ROOT/benchmarks/target/classes:$(cat "$ROOT/benchmarks/target/bench.classpath")"
FLAGS="$(sed -n 's:.*<ramtrain.jvm.flags>\([^$].*\)</ramtrain.jvm.flags>.*:\1:p' "$ROOT/pom.xml")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 "$ROOT/benchmarks/make_photos.py" --out "$WORK/photos" --n "$N" --size "$SIZE"
for store in raw jpeg; do
  "$ROOT/bin/ramtrain" preprocess -i "$WORK/photos" -o "$WORK/$store" --height "$SIZE" \
    --width "$SIZE" --store "$store" --set ramtrain.etl.val-fraction=0 >/dev/null
done
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/loader_jpeg.txt"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); $N photos ${SIZE}² -> ${CROP}², batch 128, 2 workers" | tee "$OUT"
for store in raw jpeg; do
  bytes="$(/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(s["bytes"] for s in m["splits"].values()))' "$WORK/$store/manifest.json")"
  echo "{\"store\": \"$store\", \"dataset_bytes\": $bytes, \"source_jpeg_bytes\": $(du -sb "$WORK/photos" | cut -f1)}" | tee -a "$OUT"
done
for round in $(seq "$ROUNDS"); do
  env -u OPENBLAS_CORETYPE /usr/bin/python3 "$ROOT/benchmarks/loader_jpeg_torch.py" "$WORK/photos" "$CROP" 128 2 "$EPOCHS" | tee -a "$OUT"
  # jpeg and raw with every shard mapped; jpeg read 2 shards at a time (ramtrain.train.shard-window)
  for run in "jpeg 0" "jpeg 2" "raw 0"; do
    set -- $run
    # shellcheck disable=SC2086
    java $FLAGS -cp "$CP" dev.ramtrain.bench.LoaderBench "$WORK/$1" 0 0 "$CROP" 128 2 "$EPOCHS" preprocessing "$2" 2>/dev/null | tee -a "$OUT"
  done
done
