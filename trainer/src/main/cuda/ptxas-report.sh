#!/usr/bin/env bash
# Validates every kernel for every GPU target the fatbin carries: compiles kernels.cu to PTX and
# assembles it with ptxas for each architecture, printing registers, shared memory and spills per
# kernel. Fails when ptxas rejects a kernel or a kernel spills registers to local memory. Run by
# .ci/run where nvcc is installed (CUDA's compiler needs no GPU).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cuda_bin="$(dirname "${NVCC:-$(command -v nvcc || echo /usr/local/cuda-13.0/bin/nvcc)}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
spills=0
archs=(75 80 86 89 90)
# Each target compiles and assembles on its own (one core each; CI's machines have several).
pids=()
for sm in "${archs[@]}"; do
  {
    "$cuda_bin/nvcc" -ptx -fmad=false -std=c++17 -arch=compute_$sm -o "$work/k$sm.ptx" "$here/kernels.cu" &&
      "$cuda_bin/ptxas" -v -arch=sm_$sm -o "$work/k$sm.cubin" "$work/k$sm.ptx" 2>"$work/ptxas$sm.log"
  } &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "ptxas: sm_${archs[$i]} failed:" >&2; cat "$work/ptxas${archs[$i]}.log" >&2 2>/dev/null; exit 1; }
done
printf '%-8s %-26s %5s %7s %7s\n' arch kernel regs smem spill
for sm in "${archs[@]}"; do
  # ptxas -v: "Compiling entry function 'NAME' for 'sm_XX'", then "... N bytes spill stores ...",
  # then "Used R registers, ... S bytes smem ..."
  awk -v sm="sm_$sm" '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
    /spill stores/ { split($0, a, " "); for (i = 1; i <= NF; i++) if ($i == "spill" && $(i+1) == "stores,") spill = $(i-2) }
    /Used [0-9]+ registers/ {
      regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
      smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", smem) }
      printf "%-8s %-26s %5s %7s %7s\n", sm, name, regs, smem, spill
    }' "$work/ptxas$sm.log" | tee -a "$work/table"
done
spills=$(awk '$5 > 0' "$work/table" | wc -l)
kernels=$(wc -l <"$work/table")
echo "ptxas: $kernels kernel builds across sm_75 sm_80 sm_86 sm_89 sm_90, $spills with spills"
[ "$spills" -eq 0 ] || { echo "ptxas: a kernel spills registers to local memory" >&2; exit 1; }
