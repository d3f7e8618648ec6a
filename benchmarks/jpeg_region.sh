#!/usr/bin/env bash
# What decoding fewer JPEG pixels buys (issue 13): libjpeg-turbo's DCT scaling by M/8 and region
# decoding against full decodes on one core, and whether a region decode is exact (results go to
# benchmarks/RESULTS.md by hand). Needs: apt-get install gcc libjpeg62-turbo-dev
# Usage: benchmarks/jpeg_region.sh [DIR=/tmp/ramtrain-photo-jpegs]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-/tmp/ramtrain-photo-jpegs}"
[ -d "$DIR" ] || /usr/bin/python3 "$ROOT/benchmarks/make_photos.py" --out "$DIR"
BIN="$ROOT/benchmarks/out/jpeg_region"
mkdir -p "$ROOT/benchmarks/out"
gcc -O2 -Wall -o "$BIN" "$ROOT/benchmarks/jpeg-region/jpeg_region.c" -ljpeg -lm
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); libjpeg-turbo $(dpkg-query -W -f='${Version}' libjpeg62-turbo 2>/dev/null)"
taskset -c 0 "$BIN" "$DIR"
