#!/usr/bin/env bash
# Diagnostic of a race the recorded runs always lose: a Triton write and a torch fill on a sleeping
# side stream, read at once on the default stream, under cprecord with the launch capture on and
# off, and without cprr.
cd "$(dirname "$0")/../.."
b=$(cat .device/stage/build_path)
[ -e "$b" ] || { mkdir -p "$(dirname "$b")"; ln -s "$PWD/.device/stage/build" "$b"; }
export LD_LIBRARY_PATH="$PWD/.device/stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tools/device/build_python.sh >/tmp/bp.log 2>&1 || { tail -5 /tmp/bp.log; exit 1; }
for cap in ${CAPS:-1 0}; do
  rm -f /tmp/d.db
  DIAG_OUT=/tmp/diag_$cap.txt CPRR_LAUNCH_CAPTURE=$cap CUDA_MODULE_LOADING=${LOADING:-LAZY} timeout 200 "$b/tools/cprecord" \
    --python tools/device/diag_cases --backend cuda --mode both --repeat 2 --db /tmp/d.db >/tmp/rec_$cap.txt 2>&1
  echo "== launch capture $cap (rc $?)"; cat /tmp/diag_$cap.txt
done
