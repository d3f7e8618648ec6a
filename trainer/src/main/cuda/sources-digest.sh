#!/usr/bin/env bash
# Prints one SHA-256 over the kernel sources (name and content of every .cu and .cuh, in name
# order): the fatbin's record of what it was built from. KernelSourcesTest computes the same.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
for f in $(ls *.cu *.cuh | LC_ALL=C sort); do
  printf '%s\n' "$f"
  sha256sum <"$f" | cut -d' ' -f1
done | sha256sum | cut -d' ' -f1
