#!/usr/bin/env bash
# predict on JPEG photos at 224x224 beside PyTorch 1.13 under torch.no_grad() (Debian's
# python3-torch; benchmarks/predict_torch.py: the same architecture and weights, torchvision's
# evaluation transform, batches of the same size, the same threads): peak RSS and images/s of the
# whole process (start, reading the weights file, decoding, forward, CSV), interleaved A B A B.
# The images are N seeded 500x375 JPEGs; the weights are PyTorch's seeded initialization, saved
# by torch.save under the names ramtrain reads, and both sides load that file (PyTorch:
# load_state_dict(torch.load(FILE))); what is measured does not depend on their values.
# Needs: apt-get install python3-torch python3-pil libopenblas0-pthread time
# Usage: benchmarks/predict.sh [model=resnet50|vit_b_16] [images=64] [batch=64] [threads=2] [rounds=2]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL="${1:-resnet50}"
IMAGES="${2:-64}"
BATCH="${3:-64}"
THREADS="${4:-2}"
ROUNDS="${5:-2}"
case "$MODEL" in
  resnet50) SPEC="resnet50" ;;
  vit_b_16) SPEC="vit_base_patch16_224" ;;
  *) echo "model $MODEL: resnet50 or vit_b_16" >&2; exit 2 ;;
esac
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$ROOT/benchmarks/out"
OUT="$ROOT/benchmarks/out/predict-$MODEL.txt"
/usr/bin/python3 - "$WORK/images" "$IMAGES" <<'PY'
import os, random, sys
from PIL import Image, ImageFilter
out, n = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
rng = random.Random(7)
for i in range(n):  # smooth colour fields with detail: JPEG sizes as photos have
    small = Image.new("RGB", (25, 19))
    small.putdata([tuple(rng.randrange(256) for _ in range(3)) for _ in range(25 * 19)])
    img = small.resize((500, 375), Image.BICUBIC).filter(ImageFilter.DETAIL)
    img.save(os.path.join(out, f"{i:04d}.jpg"), quality=90)
PY
/usr/bin/python3 "$ROOT/benchmarks/predict_torch.py" --model "$MODEL" --export "$WORK/weights.pth"
"$ROOT/bin/ramtrain" --help >/dev/null # builds first when the sources changed: not measured
RUN="$(mktemp)"
trap 'rm -rf "$WORK" "$RUN"' EXIT
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)" | tee "$OUT"
echo "# $MODEL, $IMAGES images of 500x375, batch $BATCH, $THREADS threads" | tee -a "$OUT"
report() { # label: wall seconds and peak RSS of the whole process, from /usr/bin/time
  read -r wall rss <"$RUN"
  awk -v l="$1" -v w="$wall" -v r="$rss" -v n="$IMAGES" \
    'BEGIN { printf "  %s whole process: %.2f s, %.2f images/s, peak RSS %d MiB\n", l, w, n / w, r / 1024 }' |
    tee -a "$OUT"
}
for round in $(seq "$ROUNDS"); do
  /usr/bin/time -f "%e %M" -o "$RUN" env -u OPENBLAS_CORETYPE /usr/bin/python3 \
    "$ROOT/benchmarks/predict_torch.py" --model "$MODEL" --weights "$WORK/weights.pth" \
    --images "$WORK/images" --batch "$BATCH" --threads "$THREADS" --out "$WORK/torch.csv" | tee -a "$OUT"
  report "pytorch "
  /usr/bin/time -f "%e %M" -o "$RUN" env -u OPENBLAS_CORETYPE "$ROOT/bin/ramtrain" predict \
    --model "$SPEC" --weights "$WORK/weights.pth" --batch-size "$BATCH" \
    --set "ramtrain.train.threads=$THREADS" -o "$WORK/ramtrain.csv" "$WORK/images" 2>/dev/null
  report "ramtrain"
done
