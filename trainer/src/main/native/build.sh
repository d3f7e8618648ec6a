#!/usr/bin/env bash
# Builds libramtrain_openmp.so (openmp_threads.c: the calling thread's OpenMP thread count in the
# runtime oneDNN loaded) into OUT, from where it goes into the trainer jar. Called by the trainer
# module's build (generate-resources); needs gcc and the JDK's JNI headers. Without them it says so
# and builds nothing: oneDNN then runs on OMP_NUM_THREADS threads, or every core.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build.sh OUT_DIR JAVA_HOME}"
java_home="${2:?usage: build.sh OUT_DIR JAVA_HOME}"
lib="$out/libramtrain_openmp.so"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "build.sh: the OpenMP thread limit is built for linux x86_64 only" >&2
  exit 0
fi
if [ "$lib" -nt "$here/openmp_threads.c" ]; then
  exit 0
fi
if ! command -v gcc >/dev/null || [ ! -e "$java_home/include/jni.h" ]; then
  echo "build.sh: WARNING: no gcc or jni.h (apt-get install gcc, and a JDK): oneDNN's threads" \
    "follow OMP_NUM_THREADS only" >&2
  exit 0
fi
mkdir -p "$out"
gcc -O2 -fPIC -shared -Wall -Wextra -fvisibility=default -I"$java_home/include" \
  -I"$java_home/include/linux" -Wl,-z,defs -o "$lib.tmp" "$here/openmp_threads.c" -ldl
mv "$lib.tmp" "$lib"
