#!/usr/bin/env bash
# What fresh worlds standing by hold on the GPUs: runs cprr_bench_gpu's fresh-only
# suites (W=1 on one GPU, W=2 on two) with --standby K while sampling the GPUs' used memory
# (nvidia-smi, every 50 ms), and prints, per staged tree, the peak next to the per-case figures
# and whether every case passed; exits with the bench's status on this commit's tree. Trees:
# .device/stage (this commit) and, when carried, .device/stage-old (an earlier build staged the
# same way), for a side-by-side comparison.
# Run on the GPU machine:  tools/device/standby_memory.sh [cases] [K]
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-12}
k=${2:-8}
out=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0
summary=()
status=2  # until this commit's tree ran
for name in stage-old stage; do
  stage=$PWD/.device/$name
  [ -d "$stage" ] || continue
  b=$(cat "$stage/build_path")
  # Both trees were built at the same path: it is a link to one tree, switched per tree.
  if [ -e "$b" ] && [ ! -L "$b" ]; then
    echo "$b exists and is no link: cannot point it at $stage/build" >&2
    exit 2
  fi
  mkdir -p "$(dirname "$b")"
  ln -sfn "$stage/build" "$b"
  log=$out/standby_memory_$name.log
  nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 50 \
    >"$out/mem_$name.csv" &
  sampler=$!
  LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 500 \
    "$b/tools/bench/cprr_bench_gpu" --cases "$cases" --standby "$k" --torch-runs 0 >"$log" 2>&1
  rc=$?
  [ "$name" = stage ] && status=$rc
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  # Every GPU's line of one sample shares its timestamp: the sum is what all held at once.
  peak=$(awk -F', ' '{used[$1] += $2} END {for (t in used) if (used[t] > m) m = used[t]; print m + 0}' \
    "$out/mem_$name.csv")
  echo "== $name (exit $rc, peak GPU memory used ${peak} MiB)"
  cat "$log"
  rows=$(grep -E "^fresh only" "$log" | sed -E 's/.*(--standby [0-9]+[^0-9]*)/\1/' | tr -s ' ' | paste -sd '|')
  summary+=("$(printf '%-10s exit %-3s peak %6s MiB  %s' "$name" "$rc" "$peak" "$rows")")
done
echo "== summary: cprr_bench_gpu --cases $cases --standby $k (peak = most memory all GPUs held at once)"
printf '%s\n' "${summary[@]}"
exit "$status"
