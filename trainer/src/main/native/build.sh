#!/usr/bin/env bash
# Builds the trainer's two JNI libraries into the classes folder CLASSES, beside the classes that
# load them, from where they go into the trainer jar. Called by the trainer module's build
# (generate-resources); needs gcc and the JDK's JNI headers. Without them it says so and builds
# nothing, and the Java paths run instead:
#   libramtrain_openmp.so  (openmp_threads.c: the calling thread's OpenMP thread count in the
#                           runtime oneDNN loaded; without it oneDNN follows OMP_NUM_THREADS)
#   libramtrain_hostadamw.so (host_adamw.c: the offloaded AdamW with bf16 copies or bf16 moments in
#                           one vectorized pass; without it the same bits from a scalar Java loop)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
classes="${1:?usage: build.sh CLASSES_DIR JAVA_HOME}"
java_home="${2:?usage: build.sh CLASSES_DIR JAVA_HOME}"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "build.sh: the trainer's JNI libraries are built for linux x86_64 only" >&2
  exit 0
fi
if ! command -v gcc >/dev/null || [ ! -e "$java_home/include/jni.h" ]; then
  echo "build.sh: WARNING: no gcc or jni.h (apt-get install gcc, and a JDK): oneDNN's threads" \
    "follow OMP_NUM_THREADS only, and the host AdamW's bf16 work runs in Java" >&2
  exit 0
fi

# build SOURCE PACKAGE_DIR LIBRARY [FLAGS...]: one library, unless it is newer than its source.
build() {
  local source="$here/$1" lib="$classes/$2/linux-x86_64/$3"
  shift 3
  if [ "$lib" -nt "$source" ] && [ "$lib" -nt "$here/build.sh" ]; then
    return
  fi
  mkdir -p "$(dirname "$lib")"
  gcc -fPIC -shared -Wall -Wextra -fvisibility=default -I"$java_home/include" \
    -I"$java_home/include/linux" -Wl,-z,defs -o "$lib.tmp" "$source" "$@"
  mv "$lib.tmp" "$lib"
}

build openmp_threads.c dev/ramtrain/trainer/backend/cpu libramtrain_openmp.so -O2 -ldl
# The AdamW arithmetic must stay the Java reference's: no FMA contraction, no fast-math; errno off
# only lets sqrtf vectorize (the result is IEEE sqrt either way).
build host_adamw.c dev/ramtrain/trainer/offload libramtrain_hostadamw.so -O3 -ffp-contract=off \
  -fno-math-errno -lm
