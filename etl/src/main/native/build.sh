#!/usr/bin/env bash
# Builds libramtrain_jpeg.so (jpeg_region.c: region decoding over libjpeg-turbo) into OUT, from
# where it goes into the etl jar. Called by the etl module's build (generate-resources); needs gcc,
# the JDK's JNI headers and Debian's libjpeg62-turbo-dev. Without them it says so and builds
# nothing: JpegRegionDecoder then decodes whole images through OpenCV, with the same pixels.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT_DIR JAVA_HOME}"
java_home="${2:?usage: build.sh OUT_DIR JAVA_HOME}"
lib="$out/libramtrain_jpeg.so"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "build.sh: region decoding is built for linux x86_64 only; whole JPEGs are decoded here" >&2
  exit 0
fi
if [ "$lib" -nt "$here/jpeg_region.c" ]; then
  exit 0
fi
if ! command -v gcc >/dev/null || [ ! -e /usr/include/jpeglib.h ] || [ ! -e "$java_home/include/jni.h" ]; then
  echo "build.sh: WARNING: no gcc, jpeglib.h or jni.h (apt-get install gcc libjpeg62-turbo-dev," \
    "and a JDK): JPEG region decoding is left out and whole JPEGs are decoded" >&2
  exit 0
fi
mkdir -p "$out"
gcc -O2 -fPIC -shared -Wall -Wextra -fvisibility=default -I"$java_home/include" \
  -I"$java_home/include/linux" -Wl,-z,defs -o "$lib.tmp" "$here/jpeg_region.c" -ljpeg
mv "$lib.tmp" "$lib"
