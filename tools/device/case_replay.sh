#!/usr/bin/env bash
# Runs on the GPU machine: records the C++ corpus cases matching FILTER on cuda (--mode both) with
# the binaries staged in STAGE (tools/device/build.sh's .device/stage, or a copy of an older
# build's, to compare against it), then replays each case that did not pass and prints its
# verdict and whether a replay confirmed it: a quick side-by-side check of one case's behaviour
# between two builds, each in its own device call (two stages do not fit one carry).
#
#   tools/device/case_replay.sh STAGE FILTER [REPEAT]
set -uo pipefail
cd "$(dirname "$0")/../.."
stage=$1 filter=$2 repeat=${3:-1}
build_path=$(cat "$stage/build_path")
if [ ! -e "$build_path" ]; then
  mkdir -p "$(dirname "$build_path")"
  ln -s "$PWD/$stage/build" "$build_path"
fi
export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp/cprr-case-replay}
mkdir -p "$out"
db="$out/cases.db"
rm -f "$db"
"$build_path/tools/cprecord" --backend cuda --mode both --repeat "$repeat" --filter "$filter" \
  --db "$db" --json >"$out/record.json" 2>"$out/record.err"
echo "record rc=$?"
python3 - "$out/record.json" <<'PY' >"$out/ids.txt"
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    if c["status"] != "pass" or c.get("verdict"):
        print(c["id"], c["label"])
PY
while read -r id label; do
  "$build_path/tools/cpreplay" --db "$db" --case "$id" --json >"$out/replay_$id.json" 2>&1
  rc=$?
  python3 - "$out/replay_$id.json" "$label" "$rc" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    print(f"{sys.argv[2]}: replay rc={sys.argv[3]}, no JSON"); sys.exit()
race = r.get("race") or {}
print(f"{sys.argv[2]}: replay rc={sys.argv[3]} verdict={r.get('verdict')} "
      f"confirmed_by={race.get('confirmed_by')!r} replays={r.get('replays')}")
PY
done <"$out/ids.txt"
