#!/usr/bin/env bash
# A stand-in for Open MPI's mpirun on the GPU machine, which has no MPI: given the command line
# cprecord builds for `--launcher mpirun` (-np N, -x VAR, --bind-to X, --oversubscribe, --host H,
# --map-by M, then the rank command), it starts N copies of the rank command on this host with
# the variables mpirun would set (OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE) and waits for them.
# TERM or INT ends them all. Used by run_gpu_checks.sh's `launcher` step through --launcher-path.
set -u
n=1
while [ $# -gt 0 ]; do
  case "$1" in
    -np | -n) n=$2; shift 2 ;;
    -x | --bind-to | --host | -H | --map-by) shift 2 ;;
    --oversubscribe) shift ;;
    *) break ;;
  esac
done
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
for ((r = 0; r < n; r++)); do
  OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_SIZE=$n "$@" &
  pids+=($!)
done
wait
