#!/usr/bin/env bash
# What fresh worlds standing by hold on the GPU (issue 14): runs cprr_bench_gpu's fresh-only
# suites (W=1 on one GPU, W=2 on two) with --standby K while sampling the GPU's used memory
# (nvidia-smi, every 50 ms), and prints, per staged tree, the peak next to the per-case figures
# and whether every case passed. Trees: .device/stage (this commit) and, when carried,
# .device/stage-old (an earlier build staged the same way), for a side-by-side comparison.
# Run on the GPU machine:  tools/device/standby_memory.sh [cases] [K]
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-12}
k=${2:-8}
out=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0
summary=()
for name in stage-old stage; do
  stage=$PWD/.device/$name
  [ -d "$stage" ] || continue
  b=$(cat "$stage/build_path")
  rm -f "$b" 2>/dev/null
  mkdir -p "$(dirname "$b")"
  ln -sfn "$stage/build" "$b"
  log=$out/standby_memory_$name.log
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 >"$out/mem_$name.csv" &
  sampler=$!
  LD_LIBRARY_PATH="$stage/lib" timeout 500 "$b/tools/bench/cprr_bench_gpu" --cases "$cases" \
    --standby "$k" --torch-runs 0 >"$log" 2>&1
  rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  peak=$(sort -n "$out/mem_$name.csv" | tail -1)
  echo "== $name (exit $rc, peak GPU memory used ${peak} MiB)"
  cat "$log"
  rows=$(grep -E "^fresh only" "$log" | sed -E 's/.*(--standby [0-9]+[^0-9]*)/\1/' | tr -s ' ' | paste -sd '|')
  summary+=("$(printf '%-10s exit %-3s peak %6s MiB  %s' "$name" "$rc" "$peak" "$rows")")
done
echo "== summary: cprr_bench_gpu --cases $cases --standby $k (peak = most GPU memory used at once)"
printf '%s\n' "${summary[@]}"
