#!/usr/bin/env bash
# Where a fresh world's start goes under environment variants that might cut it: runs
# cprr_bench_gpu's world-start breakdown (W=1 on one GPU, W=2 on two) once per variant, with
# NCCL's own init timings (NCCL_DEBUG=INFO into files). Run on the GPU machine with .device/stage
# carried:  tools/device/start_variants.sh [worlds per variant]
set -uo pipefail
cd "$(dirname "$0")/../.."
stage=$PWD/.device/stage
b=$(cat "$stage/build_path")
[ -e "$b" ] || { mkdir -p "$(dirname "$b")"; ln -s "$stage/build" "$b"; }
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
n=${1:-6}
variants=("" "CUDA_MODULE_LOADING=EAGER" "NCCL_SET_STACK_SIZE=0" "NCCL_SET_STACK_SIZE=1" "NCCL_RUNTIME_CONNECT=1" "NCCL_IB_DISABLE=1 NCCL_NET=Socket")
for v in "${variants[@]}"; do
  d=$(mktemp -d)
  echo "== variant: ${v:-(none)}"
  env $v NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$d/n.%p" \
    timeout 200 "$b/tools/bench/cprr_bench_gpu" --cases "$n" --standby --torch-runs 0 2>&1 |
    grep -A20 "^world start" | grep -E "context|arena|nccl|total|load"
  grep -h "Init timings" "$d"/n.* 2>/dev/null | sed 's/.*total/  nccl: total/' | sort | uniq -c | sort -rn | head -3
  rm -rf "$d"
done
