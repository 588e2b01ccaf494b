#!/usr/bin/env bash
# A stand-in for mpirun that plays several nodes on this host (engine_launcher_test.cpp), passed as
# --launcher-path with --hosts naming the "nodes": it starts the -np N copies of its command (the
# node agent, which follows the launcher's own options) with OMPI_COMM_WORLD_RANK set as mpirun
# sets it, writes each one's pid to $CPRR_TEST_AGENT_PIDS/node-I.pid when that is set, and waits
# for them. TERM ends them with it.
set -u
args=("$@")
np=1
start=-1
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np) np="${args[i + 1]}" ;;
    --agent) start=$((i - 1)); break ;;
  esac
done
if [ "$start" -lt 0 ]; then
  echo "nodes_on_this_host.sh: no --agent command in: $*" >&2
  exit 2
fi
cmd=("${args[@]:start}")
pids=()
for ((n = 0; n < np; n++)); do
  OMPI_COMM_WORLD_RANK=$n "${cmd[@]}" &
  pids+=($!)
  if [ -n "${CPRR_TEST_AGENT_PIDS:-}" ]; then echo $! >"$CPRR_TEST_AGENT_PIDS/node-$n.pid"; fi
done
trap 'kill "${pids[@]}" 2>/dev/null' TERM INT
wait
