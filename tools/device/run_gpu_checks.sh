#!/usr/bin/env bash
# Runs on the GPU machine, from the repo root, with .device/stage carried (made by
# tools/device/build.sh): the GPU test suites, the corpus on the cuda backend next to the cpu
# backend, the GPU benchmarks and the recording overhead. Full logs go to $OUT (or
# /tmp/cprr-gpu-out); a short table is printed last, with every benchmark's exit status.
#
#   tools/device/run_gpu_checks.sh [tests] [corpus] [races] [symmetric] [trace] [bench] [recording]
#                                  [standby] [launcher] [examples] [triage] [python] [pybench]
#                                  [mismatch] [descriptors] [pyraces] [pycost] [pyalloc]
#                                  [pysymmetric] [faults] [suites] [suitesbench] [suitesplugin]
#                                  [startbench] [capture] [launches] [diagnose] [launchcost]
#                                  [graphs] [launchdefault] [pystandby]
#                                  [upstream_nccl] [upstream_gloo] [upstream_bases] [jobs] [pyjobs]
#                                  [ddp] [pyshim] [upstream_rpc] [upstream_rpc_faulty] [cpumesh]
#                                  (default: tests corpus races symmetric trace bench; bench
#                                  includes recording: every figure from one step)
#   GTEST_FILTER=... limits the tests; CPRR_CORPUS_FILTER=REGEX limits the corpus (cprecord --filter).
# Each step takes about 5 minutes on 4 H200s; a device call has 10, so give each step its own call.
# Every summary line is printed as soon as its step ends, so a run cut short still says something.
set -uo pipefail
cd "$(dirname "$0")/../.."
stage=$PWD/.device/stage
[ -f "$stage/build_path" ] || { echo "no $stage: run tools/device/build.sh first and carry .device/stage" >&2; exit 2; }
build_path=$(cat "$stage/build_path")
if [ ! -e "$build_path" ]; then
  mkdir -p "$(dirname "$build_path")"
  ln -s "$stage/build" "$build_path"
fi
export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast (the harness forces it for ranks as well)
out=${OUT:-/tmp/cprr-gpu-out}
mkdir -p "$out"
b=$build_path
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests corpus races symmetric trace bench)
summary=()
report() {
  printf '%s\n' "$@"
  summary+=("$@")
}
# bench NAME TIMEOUT ARGS...: runs tools/bench/cprr_bench_NAME into $out/bench_NAME.txt and reports
# its exit status and the last lines of its output (or that this build has no such benchmark).
bench() {
  local name=$1 limit=$2 exe="$b/tools/bench/cprr_bench_$1"
  shift 2
  if [ ! -x "$exe" ]; then
    report "== bench_$name: not built"
    return
  fi
  timeout "$limit" "$exe" "$@" >"$out/bench_$name.txt" 2>&1
  report "== bench_$name rc=$?" "$(tail -n 30 "$out/bench_$name.txt")"
}

# pyrun NAME FOLDER ARGS...: cprecord --python FOLDER on cuda with ARGS (and CPRR_PYTHON_FILTER)
# into $out/NAME.{json,err,txt}; reports its exit status, wall time and unexpected cases.
pyrun() {
  local name=$1 folder=$2 start rc
  shift 2
  start=$(date +%s%N)
  timeout 280 "$b/tools/cprecord" --python "$folder" --backend cuda --json --db "/tmp/$name.db" \
    --filter "${CPRR_PYTHON_FILTER:-.}" "$@" >"$out/$name.json" 2>"$out/$name.err"
  rc=$?
  python3 tools/device/python_table.py "$out/$name.json" >"$out/$name.txt" 2>&1
  report "$(printf '%s rc=%-3s %6d ms' "$name" "$rc" $((($(date +%s%N) - start) / 1000000)))" \
    "$(grep -E 'NOT AS EXPECTED|^exit' "$out/$name.txt")"
}

# diag NAME: tools/device/diag_cases/test_NAME.py (correct cases) through cprecord on cuda in both
# modes into $out/NAME.{db,json,err}; reports each case's status, verdict, cprr's finding and a
# failing rank's last error line.
diag() {
  PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$b/python" timeout 300 "$b/tools/cprecord" \
    --python "tools/device/diag_cases/test_$1.py" --backend cuda --mode both --json \
    --db "$out/$1.db" >"$out/$1.json" 2>"$out/$1.err"
  report "$1 rc=$?" "$(python3 -c '
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    f = c.get("uninitialized_read") or c.get("race") or {}
    errors = [r.get("error", "").strip().splitlines()[-1:] for e in c["executions"]
              for r in e.get("ranks", []) if r.get("outcome") == "fail"]
    print(c["label"], c["status"], c.get("verdict"), (f.get("detail") or "")[:300], errors[:1])
' "$out/$1.json" 2>&1)" "$(tail -n 4 "$out/$1.err")"
}

# The _cprr module for the Python there (build_python.sh), once per run; says why when it fails.
# jobs_side_by_side NAME WHAT ARGS...: cprecord ARGS on cuda in both modes with --jobs 1 and with
# --jobs as many as the GPUs allow ($out/NAME_<n>.{db,json,err}), each one's wall time reported,
# then every case's status and verdict compared ($out/NAME_table.txt).
jobs_side_by_side() {
  local name=$1 what=$2 n start rc
  shift 2
  for n in 1 "$gpus"; do
    start=$(date +%s%N)
    timeout 280 "$b/tools/cprecord" --backend cuda --mode both --jobs "$n" --json \
      --db "$out/${name}_$n.db" "$@" >"$out/${name}_$n.json" 2>"$out/${name}_$n.err"
    rc=$?
    report "$(printf '%s W=2 cuda both modes --jobs %s: rc=%-3s %7d ms' "$what" "$n" $rc $((($(date +%s%N) - start) / 1000000)))"
  done
  python3 tools/device/same_statuses.py "$out/${name}_1.json" "$out/${name}_$gpus.json" \
    >"$out/${name}_table.txt" 2>&1
  report "$(tail -n 3 "$out/${name}_table.txt")"
}

python_module() {
  [ -n "${python_built:-}" ] && return 0
  if ! tools/device/build_python.sh >"$out/build_python.log" 2>&1; then
    report "python: build failed: $(tail -n 5 "$out/build_python.log")"
    return 1
  fi
  python_built=1
}

nvidia-smi -L >"$out/gpus.txt" 2>&1
gpus=$(grep -c '^GPU' "$out/gpus.txt")
nvidia-smi topo -m >>"$out/gpus.txt" 2>&1

for step in "${steps[@]}"; do
  case $step in
    tests)
      for t in "$b"/tests/cprr_*_gpu_tests; do
        name=$(basename "$t")
        timeout 500 "$t" >"$out/$name.log" 2>&1
        rc=$?
        pass=$(grep -c '^\[       OK \]' "$out/$name.log")
        fail=$(grep -c '^\[  FAILED  \].*(' "$out/$name.log")
        skip=$(grep -c '^\[  SKIPPED \].*(' "$out/$name.log")
        report "$(printf '%-32s rc=%-3s %3s passed %3s failed %3s skipped' "$name" "$rc" "$pass" "$fail" "$skip")"
      done
      ;;
    mismatch)
      # The live collective check on cuda (ranks sharing the GPU): its GPU tests, then
      # how soon a stuck mismatch is named (cprr_bench_mismatch).
      t="$b/tests/cprr_recorder_gpu_tests"
      timeout 200 "$t" --gtest_filter='LiveMismatchGpu.*' >"$out/live_mismatch.log" 2>&1
      report "live mismatch gpu tests rc=$? $(grep -cE '^\[       OK \]' "$out/live_mismatch.log") passed" \
        "$(grep -E '^\[  (FAILED|SKIPPED) \].*\(' "$out/live_mismatch.log")"
      bench mismatch 300 --backend cuda --runs "${CPRR_BENCH_RUNS:-5}"
      ;;
    descriptors)
      # What CUDA and NCCL leave inheritable during a case (each first execution prints
      # it) is close-on-exec before the next case; one rank alone (NCCL) and two sharing the GPU.
      t="$b/tests/cprr_recorder_gpu_tests"
      timeout 200 "$t" --gtest_filter='DescriptorsGpu.*' >"$out/descriptors.log" 2>&1
      report "descriptors gpu test rc=$? $(grep -cE '^\[       OK \]' "$out/descriptors.log") passed" \
        "$(grep -E 'all_reduce left|^\[  (FAILED|SKIPPED) \].*\(' "$out/descriptors.log")"
      ;;
    python)
      # The Python corpus (corpus/python) on cuda with the Python there (torch 2.x): the module
      # is built first (build_python.sh); each bug's verdict and its replay's, beside the twins'.
      python_module || continue
      start=$(date +%s%N)
      timeout 500 "$b/tools/cprecord" --python corpus/python --backend cuda --mode both --json \
        --db "$out/python_cuda.db" --filter "${CPRR_PYTHON_FILTER:-.}" \
        >"$out/python_cuda.json" 2>"$out/python_cuda.err"
      rc=$?
      ms=$((($(date +%s%N) - start) / 1000000))
      report "$(printf 'python cuda rc=%-3s %6d ms' "$rc" "$ms")" \
        "$(python3 tools/device/python_table.py "$out/python_cuda.json" 2>&1)"
      # One file for every replay: the device tool brings back only so many files.
      for id in $(python3 tools/device/python_table.py --bug-ids "$out/python_cuda.json"); do
        one=$(mktemp)
        timeout 200 "$b/tools/cpreplay" --db "$out/python_cuda.db" --case "$id" >"$one" 2>&1
        rc=$?
        { echo "=== cpreplay --case $id: exit $rc"; cat "$one"; } >>"$out/python_replays.txt"
        report "replay $id rc=$rc: $(grep -E '^case [0-9]+ ' "$one" | head -1)"
        rm -f "$one"
      done
      ;;
    suites)
      # corpus/suites run unchanged (TestCase family, torchrun scripts, per-rank pytest
      # items) on cuda in both modes, every planted bug's verdict and replay checked, and the
      # continuous class under torch's own harness (check_suites.py).
      python_module || continue
      timeout "${CPRR_SUITES_TIMEOUT:-550}" python3 tools/device/check_suites.py --build "$b" \
        --backend cuda --out "$(mktemp -d)" ${CPRR_SUITES_ARGS:-} >"$out/suites.txt" 2>&1
      report "suites rc=$?" "$(tail -n 12 "$out/suites.txt")"
      ;;
    upstream_nccl | upstream_gloo | upstream_bases | upstream_rpc | upstream_rpc_faulty)
      # PyTorch's own DistributedTest (tests/python/upstream) under its own harness and
      # under cprecord --mode both, side by side (compare_harness.py): with NCCL at W=2 on two
      # GPUs, or without GPUs on gloo (CUDA_VISIBLE_DEVICES=, as the suite skips its NCCL tests
      # when GPUs are fewer than ranks); then the other bases torch 2.x ships. Every K-th test:
      # CPRR_UPSTREAM_EVERY (default 14 with NCCL, 7 on gloo).
      python_module || continue
      # CPRR_UPSTREAM_WORLD: the world size (default 2; 4 on a -x4, 1 on one GPU with NCCL).
      world=${CPRR_UPSTREAM_WORLD:-2}
      upath="$b/python:$PWD/tests/python/stand_ins"
      uenv=(env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$upath" WORLD_SIZE="$world")
      ufile=tests/python/upstream/dist_backend_spawn.py
      case $step in
        upstream_nccl)
          [ "$gpus" -ge "$world" ] || { report "upstream_nccl: needs $world GPUs, this machine has $gpus"; continue; }
          uenv+=(BACKEND=nccl); uargs=(--backend cuda --every "${CPRR_UPSTREAM_EVERY:-14}") ;;
        upstream_gloo)
          uenv+=(BACKEND=gloo CUDA_VISIBLE_DEVICES=); uargs=(--backend cpu --every "${CPRR_UPSTREAM_EVERY:-7}") ;;
        upstream_bases)
          # On gloo without GPUs: these tests ask for gloo on the CPU.
          ufile=tests/python/upstream/other_bases.py
          uenv+=(BACKEND=gloo CUDA_VISIBLE_DEVICES=); uargs=(--backend cpu --all) ;;
        upstream_rpc | upstream_rpc_faulty)
          # PyTorch's RPC suites at W=4 (their fixtures'), without GPUs: every K-th test of each
          # class, CPRR_UPSTREAM_PER_CLASS (default 8 for TensorPipe's, 4 for the faulty agent's).
          ufile=tests/python/upstream/rpc_tensorpipe.py; per=8
          [ "$step" = upstream_rpc_faulty ] && ufile=tests/python/upstream/rpc_faulty.py && per=4
          uenv+=(CUDA_VISIBLE_DEVICES=)
          uargs=(--backend cpu --per-class "${CPRR_UPSTREAM_PER_CLASS:-$per}") ;;
      esac
      # CPRR_UPSTREAM_TESTS="Class.test ..." runs those tests only and keeps the database.
      [ -n "${CPRR_UPSTREAM_TESTS:-}" ] && read -ra picked <<<"$CPRR_UPSTREAM_TESTS" &&
        uargs+=(--tests "${picked[@]}" --db "$out/$step.db")
      # CPRR_UPSTREAM_SAMPLE=1: every Python process sampled (tools/device/stack_sampler), and
      # where cprr's processes spent their time written to $step.samples.txt.
      samples=""
      if [ -n "${CPRR_UPSTREAM_SAMPLE:-}" ]; then
        samples=$(mktemp -d)
        uenv+=(CPRR_SAMPLE_DIR="$samples" PYTHONPATH="$PWD/tools/device/stack_sampler:$upath")
      fi
      # --serial: each harness's time per test its own, and the GPUs one harness's at a time.
      # --deadline (CPRR_UPSTREAM_DEADLINE, default 470 s): both harnesses stopped there and the
      # tests both ended compared, so a sample too large for one call still reports its rows.
      timeout 570 "${uenv[@]}" python3 tests/python/upstream/compare_harness.py --serial \
        --deadline "${CPRR_UPSTREAM_DEADLINE:-470}" \
        --cprecord "$b/tools/cprecord" --file "$ufile" --known docs/UPSTREAM.md \
        --json "$out/$step.json" "${uargs[@]}" >"$out/$step.txt" 2>&1
      report "$step rc=$?" "$(grep -v ' yes$' "$out/$step.txt" | tail -n 14)"
      [ -n "$samples" ] && python3 tools/device/stack_report.py "$samples" --argv cprr --top 60 \
        >"$out/$step.samples.txt" 2>&1
      ;;
    ddp)
      # torch's DistributedDataParallel under the op capture (tools/device/diag_cases/test_ddp.py,
      # correct cases): each case's status and cprr's finding, if any, in both modes.
      python_module || continue
      diag ddp
      ;;
    cpumesh)
      # A DeviceMesh made where the case never called init_process_group
      # (tools/device/diag_cases/test_cpu_mesh.py, correct cases): a CPU mesh in an NCCL world
      # gets cpu's gloo, as DeviceMesh's own init_process_group() would.
      python_module || continue
      diag cpu_mesh
      ;;
    suitesbench)
      # The suites benchmark on cuda: each suite through its own harness against cprecord.
      python_module || continue
      timeout 550 python3 tools/bench/suites_bench.py --build "$b" --backend cuda \
        --torchrun-tests "${CPRR_TORCHRUN_TESTS:-4}" >"$out/suites_bench.txt" 2>&1
      report "suites bench rc=$?" "$(tail -n 6 "$out/suites_bench.txt")"
      ;;
    suitesplugin)
      # corpus/suites on cuda by the two other ways in: the pytest plugin over the TestCase and
      # per-rank suites (both modes; the planted leaks and mismatch fail pooled, nothing else
      # fails), and cprecord --torchrun on the context-parallel script, each command line
      # alone (each passes: the leak needs both in one pooled world).
      python_module || continue
      penv=(env PYTHONDONTWRITEBYTECODE=1 CPRR_CPRECORD="$b/tools/cprecord"
        PYTHONPATH="$b/python:$PWD/tests/python/stand_ins")
      for suite in testcase per_rank; do
        extra=()
        [ "$suite" = per_rank ] && extra=(--cprr-nproc-per-node 2)
        timeout 400 "${penv[@]}" python3 -m pytest -p cprr.pytest_plugin -p no:cacheprovider \
          --cprr-backend cuda --cprr-mode both --cprr-db "$out/plugin_$suite.db" -rfs -q \
          "${extra[@]}" "corpus/suites/$suite" >"$out/plugin_$suite.txt" 2>&1
        report "pytest plugin $suite (cuda, both) rc=$?: $(tail -n 1 "$out/plugin_$suite.txt")" \
          "$(grep -E '^(FAILED|SKIPPED)' "$out/plugin_$suite.txt" | cut -c1-150)"
      done
      script=corpus/suites/torchrun/scripts/run_context_parallel.py
      for fmt in thd bshd; do
        timeout 200 "${penv[@]}" "$b/tools/cprecord" --torchrun "$script" --nproc-per-node 2 \
          --backend cuda --mode both --db "$out/torchrun.db" -- --format "$fmt" --config cp_1_0 \
          >"$out/torchrun_$fmt.txt" 2>&1
        report "cprecord --torchrun ($fmt, cuda, both) rc=$?: $(tail -n 2 "$out/torchrun_$fmt.txt" | tr '\n' ' ')"
      done
      ;;
    graphs)
      # corpus/python_graphs (a graph replayed on the current stream, and on a
      # side stream with and without a wait) recorded on cuda, launch capture off and on, then
      # each case replayed (the bug's race confirmed, the others reproduced).
      python_module || continue
      # 0 and 1: the C++ op capture without and with the launch capture; python: the dispatch
      # mode.
      for launch in 0 1 python; do
        db=/tmp/graphs_$launch.db
        rm -f "$db"
        env CPRR_LAUNCH_CAPTURE=$([ $launch = 1 ] && echo 1 || echo 0) \
          $([ $launch = python ] && echo CPRR_OP_CAPTURE=python) timeout 200 \
          "$b/tools/cprecord" --python corpus/python_graphs --backend cuda --mode both --repeat 2 \
          --json --db "$db" >"$out/graphs_$launch.json" 2>"$out/graphs_$launch.err"
        report "graphs launch capture=$launch rc=$?" \
          "$(python3 tools/device/python_table.py "$out/graphs_$launch.json" 2>&1 | tail -n 5)"
      done
      python3 tools/device/op_log.py /tmp/graphs_1.db --mode fresh >"$out/graphs_ops.txt" 2>&1
      for id in 1 2 3; do
        CPRR_LAUNCH_CAPTURE=1 timeout 120 "$b/tools/cpreplay" --db /tmp/graphs_1.db --case $id \
          >"$out/graphs_replay_$id.txt" 2>&1
        report "replay $id rc=$?: $(grep -E '^case [0-9]+ ' "$out/graphs_replay_$id.txt" | head -1)"
      done
      ;;
    launchcost)
      # The capture's cost per launch past the dispatcher (raw, Triton, raw copy)
      # beside CSAN and compute-sanitizer (tools/bench/launch_cost.py; a few minutes).
      python_module || continue
      PYTHONPATH=$b/python timeout 500 python3 tools/bench/launch_cost.py "$b/tools/cprecord" \
        --n "${CPRR_LAUNCH_COST_N:-1000}" >"$out/launch_cost.txt" 2>&1
      report "launch_cost rc=$?" "$(tail -n 10 "$out/launch_cost.txt")"
      ;;
    diagnose)
      # What the last runs left unexplained, in files to read: which parameter query answers
      # for a runtime launch (probe_param_info.cu), the extension's launches with
      # CPRR_LAUNCH_DEBUG, and the op logs of the Python cases CPRR_DIAGNOSE_FILTER picks (default:
      # py_config_mutation, which only the dispatch mode finds a race in on cuda) under both
      # captures, ranks sharing GPU 0 and a GPU per rank: ts_{0,all}_{native,python}.ops.
      python_module || continue
      nvcc -arch=sm_90 -o "$out/probe" tools/device/probe_param_info.cu -lcuda \
        >"$out/probe.txt" 2>&1 && "$out/probe" >>"$out/probe.txt" 2>&1
      report "probe rc=$?" "$(tail -n 12 "$out/probe.txt")"
      rm -f "$out/probe"
      PYTHONPATH=$b/python:corpus/python_launch timeout 300 python3 -c \
        'import test_launches as t; t._extension()' >"$out/extension_build.log" 2>&1
      CPRR_LAUNCH_CAPTURE=1 CPRR_LAUNCH_DEBUG="$out/launch_debug.txt" timeout 200 \
        "$b/tools/cprecord" --python corpus/python_launch --backend cuda --mode fresh \
        --filter extension_side --db /tmp/diag_launch.db >/dev/null 2>&1
      report "extension launches rc=$?" "$(sort "$out/launch_debug.txt" | uniq -c | head -8)"
      for gpus in 0 all; do
        for cap in native python; do
          db=/tmp/diag_ts_${gpus}_$cap.db
          rm -f "$db"
          env $([ $cap = python ] && echo CPRR_OP_CAPTURE=python) \
            $([ $gpus = 0 ] && echo CUDA_VISIBLE_DEVICES=0) timeout 200 "$b/tools/cprecord" \
            --python corpus/python --backend cuda --mode both --repeat 2 \
            --filter "${CPRR_DIAGNOSE_FILTER:-config_mutation}" --json --db "$db" \
            >"$out/ts_${gpus}_$cap.json" 2>/dev/null
          report "diagnosed cases gpus=$gpus capture=$cap rc=$?"
          python3 tools/device/op_log.py "$db" >"$out/ts_${gpus}_$cap.ops" 2>&1
        done
      done
      ;;
    launches)
      # Kernels the dispatcher does not see (corpus/python_launch: Triton, an extension
      # through pybind, declared and not) with CPRR_LAUNCH_CAPTURE=1 (cpreplay re-applies it):
      # verdicts at record time, then every case replayed (each bug's race confirmed, the
      # shared-weight candidate dropped, the twins reproduced). The extension is built first, in
      # /tmp/cprr_torch_extensions. The whole step outlasts one device call (about 12 minutes
      # on an H200): CPRR_PYTHON_FILTER splits it, e.g. 'triton|extension' and 'raw_'.
      python_module || continue
      work=$(mktemp -d)
      # The extension is built before the cases run, as a suite's extensions are: a build inside
      # a case outlasts its hang limit, and a killed build leaves torch's lock behind. A filter
      # that names no extension case (CPRR_PYTHON_FILTER=triton) skips it.
      if [ "${CPRR_PYTHON_FILTER:-.}" = . ] || [[ "${CPRR_PYTHON_FILTER}" == *extension* ]]; then
        PYTHONPATH=$b/python:corpus/python_launch timeout 300 python3 -c \
          'import test_launches as t; t._extension()' >"$out/extension_build.log" 2>&1
        report "extension build rc=$?"
      fi
      CPRR_LAUNCH_CAPTURE=1 timeout 500 "$b/tools/cprecord" --python corpus/python_launch \
        --backend cuda --mode fresh --json --db "$work/launch.db" \
        --filter "${CPRR_PYTHON_FILTER:-.}" >"$work/launch.json" \
        2>"$work/launch.err"
      report "launches rc=$?"
      cp "$work/launch.json" "$work/launch.err" "$out/"
      report "$(python3 tools/device/python_table.py "$work/launch.json" 2>&1)"
      for id in $(python3 -c 'import json,sys; [print(c["id"]) for c in json.load(open(sys.argv[1]))["cases"]]' "$work/launch.json"); do
        t0=$(date +%s.%N)
        timeout 200 "$b/tools/cpreplay" --db "$work/launch.db" --case "$id" >"$work/r.txt" 2>&1
        rc=$?
        secs=$(python3 -c "import time; print(round(time.time() - $t0, 1))")
        cat "$work/r.txt" >>"$out/launch_replays.txt"
        # What the probe replay learned, and the order a fix applied showed.
        report "replay $id rc=$rc in ${secs}s: $(grep -E '^case [0-9]+ ' "$work/r.txt" | head -1)" \
          "$(grep -E '^  (confirmed by|race note|order|learned)' "$work/r.txt" | head -4)"
      done
      ;;
    launchdefault)
      # Whether the launch capture can be on by default. corpus/python and
      # corpus/python_gpu on cuda, --mode both, with CPRR_LAUNCH_CAPTURE off and on: each run's
      # unexpected cases and totals (the full tables in $out/launch_{0,1}_*.txt).
      # CPRR_LAUNCH_CORPORA="python" runs one of them (each pair takes minutes).
      python_module || continue
      for corpus in ${CPRR_LAUNCH_CORPORA:-python python_gpu}; do
        for on in 0 1; do
          CPRR_LAUNCH_CAPTURE=$on pyrun launch_${on}_$corpus corpus/$corpus --mode both
        done
      done
      ;;
    pystandby)
      # The Python corpus fresh without and with standby worlds against pooled
      # (wall time of the whole run; a GPU per rank where there are enough).
      python_module || continue
      pyrun pystandby_pool corpus/python --mode pool
      pyrun pystandby_fresh corpus/python --mode fresh
      pyrun pystandby_fresh_standby4 corpus/python --mode fresh --standby 4
      ;;
    pyraces)
      # The stream seeds as PyTorch code (corpus/python_gpu) on cuda, ranks sharing the
      # GPU(s): verdicts at record time, each bug replayed (its race confirmed or not), then the
      # same cases in plain torch under PyTorch's CUDA sanitizer, with the time per case of each.
      # Databases stay on the machine; $out gets the reports and one file of replays.
      python_module || continue
      work=$(mktemp -d)
      for capture in on off; do
        CPRR_OP_CAPTURE=$capture timeout 300 "$b/tools/cprecord" --python corpus/python_gpu \
          --backend cuda --mode both --repeat 3 --json --db "$work/pyraces_$capture.db" \
          >"$work/pyraces_$capture.json" 2>"$work/pyraces_$capture.err"
        report "pyraces capture $capture rc=$?"
      done
      cp "$work/pyraces_on.json" "$out/pyraces_on.json"
      report "$(python3 tools/device/python_table.py "$work/pyraces_on.json" 2>&1)" \
        "$(python3 -c 'import json,sys; [print(c["label"], "notes:", c.get("race_notes")) for c in json.load(open(sys.argv[1]))["cases"] if c.get("race_notes")]' "$work/pyraces_on.json")"
      for id in $(python3 tools/device/python_table.py --bug-ids "$work/pyraces_on.json"); do
        timeout 200 "$b/tools/cpreplay" --db "$work/pyraces_on.db" --case "$id" >"$work/r.txt" 2>&1
        rc=$?
        cat "$work/r.txt" >>"$out/pyraces_replays.txt"
        report "replay $id rc=$rc: $(grep -E '^case [0-9]+ ' "$work/r.txt" | head -1)" \
          "  $(grep -E '^  confirmed by' "$work/r.txt" | head -1)"
      done
      timeout 300 python3 tools/device/csan_compare.py corpus/python_gpu \
        --cprr "$work/pyraces_on.json" --cprr-off "$work/pyraces_off.json" >"$out/csan.txt" 2>&1
      report "csan rc=$?" "$(cat "$out/csan.txt")"
      rm -rf "$work"
      ;;
    pyshim)
      # A suite's own process-group set-up and harness classes (tests/python/test_suite_shim.py,
      # test_suites.py) under this machine's torch 2.x: its BackendConfig, its own
      # MultiProcContinuousTest, a backend the world's group is not. Not the two tests that list
      # the CI machine's classes and outcomes (here torch sees a GPU: a CUDA class more, and
      # gloo 2.11 aborts on the planted size mismatch).
      python_module || continue
      PYTHONPATH=$b/python PYTHONDONTWRITEBYTECODE=1 CPRR_CPRECORD=$b/tools/cprecord timeout 300 \
        python3 -m pytest -q -p no:cacheprovider tests/python/test_suite_shim.py \
        tests/python/test_suites.py -k "not labelled_class_method and not pytest_plugin_runs" \
        >"$out/pyshim_tests.txt" 2>&1
      report "pyshim tests rc=$?: $(tail -1 "$out/pyshim_tests.txt")" \
        "$(grep -E '^(FAILED|ERROR)' "$out/pyshim_tests.txt" | head -8)"
      ;;
    capture)
      # The C++ op capture (_cprr_torch, built by build_python.sh for this
      # torch) against the Python dispatch mode: its unit tests, both captures over the Python
      # corpora on cuda compared op for op (tools/capture_compare.py), and its cost per aten op
      # beside the Python mode's and CSAN's (capture_profile.py).
      python_module || continue
      report "$(grep -E 'op capture' "$out/build_python.log")"
      PYTHONPATH=$b/python PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 -m pytest -q -p no:cacheprovider \
        tests/python/test_native_capture.py tests/python/test_op_capture.py >"$out/capture_tests.txt" 2>&1
      report "capture tests rc=$?: $(tail -1 "$out/capture_tests.txt")"
      for corpus in python_gpu python; do
        PYTHONPATH=$b/python timeout 500 python3 tools/capture_compare.py "$b/tools/cprecord" -- \
          --python corpus/$corpus --backend cuda --mode both --filter "${CPRR_PYTHON_FILTER:-.}" \
          >"$out/capture_compare_$corpus.txt" 2>&1
        report "capture_compare $corpus rc=$?" "$(tail -n 8 "$out/capture_compare_$corpus.txt")"
      done
      # The twin of seed 001: CSAN raises on the bug itself, ending its timing.
      PYTHONPATH=$b/python timeout 200 python3 tools/device/capture_profile.py corpus/python_gpu \
        fixed/py_cp_max_logit_race >"$out/capture_profile.txt" 2>&1
      report "profile rc=$?" "$(tail -n 4 "$out/capture_profile.txt")"
      ;;
    pyalloc)
      # cprr's device arena as torch's CUDA allocator. corpus/python_gpu recorded with
      # it under two placement policies and with torch's own (CPRR_TORCH_ALLOCATOR=off): the
      # verdicts of each, how each placed the tensors, and the record_stream bug replayed.
      python_module || continue
      work=$(mktemp -d)
      for variant in best_fit never_reuse torch; do
        placement=$variant allocator=on
        [ "$variant" = torch ] && placement=best_fit allocator=off
        CPRR_TORCH_ALLOCATOR=$allocator timeout 200 "$b/tools/cprecord" --python corpus/python_gpu \
          --backend cuda --mode both --repeat 2 --placement "$placement" --json \
          --db "$work/$variant.db" >"$work/$variant.json" 2>"$work/$variant.err"
        report "pyalloc $variant rc=$?" "$(python3 tools/device/python_table.py "$work/$variant.json" 2>&1)" \
          "$(grep -m3 '^cprr: ' "$work/$variant.err")"
      done
      report "$(python3 tools/device/alloc_table.py "best_fit=$work/best_fit.db" \
        "never_reuse=$work/never_reuse.db" "torch's=$work/torch.db" 2>&1)"
      for id in $(python3 tools/device/python_table.py --bug-ids "$work/best_fit.json"); do
        timeout 200 "$b/tools/cpreplay" --db "$work/best_fit.db" --case "$id" >"$work/r.txt" 2>&1
        report "replay $id rc=$?: $(grep -E '^case [0-9]+ ' "$work/r.txt" | head -1)" \
          "  $(grep -E '^  confirmed by' "$work/r.txt" | head -1)"
      done
      rm -rf "$work"
      ;;
    pysymmetric)
      # Torch's symmetric memory (corpus/python_nccl) on NCCL's symmetric kernels, a GPU
      # per rank: the verdicts with torch's allocator (its symmetric pool is a MemPool), the bug
      # replayed, the wrong sums the bug case's ranks computed, and what cprr's allocator says.
      if [ "$gpus" -lt 2 ]; then
        report "pysymmetric: needs 2 GPUs, $gpus visible"
        continue
      fi
      python_module || continue
      work=$(mktemp -d)
      CPRR_TORCH_ALLOCATOR=off timeout 240 "$b/tools/cprecord" --python corpus/python_nccl \
        --backend cuda --mode both --repeat 3 --json --db "$work/sym.db" \
        >"$work/sym.json" 2>"$work/sym.err"
      report "pysymmetric rc=$?" "$(python3 tools/device/python_table.py "$work/sym.json" 2>&1)" \
        "$(python3 -c 'import json,sys; [print(" ", c["label"], "allocation:", (c.get("allocation") or {}).get("detail")) for c in json.load(open(sys.argv[1]))["cases"]]' "$work/sym.json" 2>&1)"
      cp "$work/sym.json" "$work/sym.err" "$out/"
      for id in $(python3 tools/device/python_table.py --bug-ids "$work/sym.json"); do
        CPRR_TORCH_ALLOCATOR=off timeout 200 "$b/tools/cpreplay" --db "$work/sym.db" --case "$id" \
          >"$work/r.txt" 2>&1
        rc=$?
        cat "$work/r.txt" >>"$out/pysymmetric_replays.txt"
        report "replay $id rc=$rc: $(grep -E '^case [0-9]+ ' "$work/r.txt" | head -1)"
      done
      timeout 120 "$b/tools/cprecord" --python corpus/python_nccl --backend cuda --mode fresh \
        --filter 'pool_reuse' --json --db "$work/on.db" >"$work/on.json" 2>"$work/on.err"
      report "pysymmetric with cprr's allocator rc=$?: $(grep -m1 -o 'CPRR_TORCH_ALLOCATOR=off[^\"]*' "$work/on.json" "$work/on.err" | head -1)"
      rm -rf "$work"
      ;;
    pycost)
      # What the op capture costs per pooled case: corpus/python_gpu's two-rank cases, 10 pooled
      # runs each with CPRR_OP_CAPTURE on and off, side by side (run pyraces for CSAN's column).
      python_module || continue
      work=$(mktemp -d)
      for capture in on off; do
        CPRR_OP_CAPTURE=$capture timeout 200 "$b/tools/cprecord" --python corpus/python_gpu \
          --backend cuda --mode pool --repeat 10 --filter '@2$' --json \
          --db "$work/$capture.db" >"$work/$capture.json" 2>"$work/$capture.err"
        report "pycost capture $capture rc=$?"
      done
      report "$(python3 tools/device/csan_compare.py corpus/python_gpu --cprr-only \
        --cprr "$work/on.json" --cprr-off "$work/off.json" 2>&1)"
      rm -rf "$work"
      ;;
    corpus)
      # Every world size runs on any number of GPUs: with fewer GPUs than ranks they share them
      # (rank r on GPU r mod G) and the collectives go through Gloo, staged through host memory.
      # CPRR_CORPUS_EXCLUDE leaves cases out on both backends.
      exclude=()
      [ -n "${CPRR_CORPUS_EXCLUDE:-}" ] && exclude=(--exclude "$CPRR_CORPUS_EXCLUDE")
      # CPRR_CORPUS_REPEAT=N runs each case N times per mode; CPRR_CORPUS_BACKENDS=cuda leaves
      # the cpu side out (one device call holds a --repeat 5 run of one backend).
      report "corpus: $gpus GPU(s) visible"
      for backend in ${CPRR_CORPUS_BACKENDS:-cuda cpu}; do
        start=$(date +%s%N)
        timeout 550 "$b/tools/cprecord" --backend $backend --mode both --repeat "${CPRR_CORPUS_REPEAT:-1}" \
          --json --db "$out/corpus_$backend.db" \
          --filter "${CPRR_CORPUS_FILTER:-.}" "${exclude[@]}" \
          >"$out/corpus_$backend.json" 2>"$out/corpus_$backend.err"
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        report "$(printf 'corpus %-5s rc=%-3s %6d ms' "$backend" "$rc" "$ms")"
      done
      python3 tools/device/corpus_table.py "$out/corpus_cpu.json" "$out/corpus_cuda.json" \
        >"$out/corpus_table.txt" 2>&1
      report "$(tail -n 2 "$out/corpus_table.txt")"
      ;;
    standby)
      # The short W=2 cases (no faults, no 100 MiB banner) in fresh mode on
      # cuda, without standby worlds and with them; the same statuses are expected.
      short=(--filter '@2$' --exclude 'skip_collective|collective_size_mismatch|segfault|banner_flood')
      for n in 0 2 4; do
        start=$(date +%s%N)
        timeout 250 "$b/tools/cprecord" --backend cuda --mode fresh --standby $n --json \
          --db "$out/standby_$n.db" "${short[@]}" >"$out/standby_$n.json" 2>"$out/standby_$n.err"
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        cases=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cases"]))' "$out/standby_$n.json" 2>/dev/null || echo 0)
        report "$(printf 'fresh suite, --standby %d: rc=%-3s %3s cases %7d ms (%d ms/case)' $n $rc "$cases" $ms $((ms / (cases > 0 ? cases : 1))))"
      done
      python3 tools/device/same_statuses.py "$out/standby_0.json" "$out/standby_2.json" "$out/standby_4.json" \
        >"$out/standby_table.txt" 2>&1
      report "$(tail -n 3 "$out/standby_table.txt")"
      ;;
    jobs)
      # On one machine: the short corpus on cuda in both modes with --jobs as many as the
      # GPUs allow (worlds of two jobs never share a GPU: more is refused, said below), beside
      # --jobs 1; a merge of its two shards on cuda; the cpu backend's jobs benchmark on this
      # machine's cores.
      short=(--filter '@2$' --exclude 'skip_collective|collective_size_mismatch|segfault|banner_flood|recv_never')
      "$b/tools/cprecord" --backend cuda --jobs $((gpus + 1)) --db "$out/jobs_refused.db" \
        "${short[@]}" >/dev/null 2>"$out/jobs_refused.err"
      report "--jobs $((gpus + 1)) on $gpus GPU(s): rc=$? $(tail -n 1 "$out/jobs_refused.err")"
      jobs_side_by_side jobs "C++ corpus" "${short[@]}"
      report "devices recorded: $(python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select group_concat(distinct devices) from execution").fetchone()[0])' "$out/jobs_$gpus.db" 2>&1)"
      for i in 1 2; do
        "$b/tools/cprecord" --backend cuda --mode both --shard $i/2 --db "$out/shard_$i.db" \
          "${short[@]}" >/dev/null 2>"$out/shard_$i.err"
      done
      "$b/tools/cprecord" --db "$out/merged.db" --merge "$out/shard_1.db" "$out/shard_2.db" \
        >"$out/merged.txt" 2>"$out/merged.err"
      report "cuda shards 1/2 + 2/2 merged: rc=$? $(grep -E 'cases: ' "$out/merged.txt" | tail -n 1)"
      case_id=$(python3 -c 'import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute("select c.id from test_case c join run r on r.id = c.run_id where r.merged_into is null and c.label = ?", ("bug/cp_maxlogit_race@2",)).fetchone(); print(r[0] if r else "")' "$out/merged.db" 2>/dev/null)
      if [ -n "$case_id" ]; then
        timeout 200 "$b/tools/cpreplay" --db "$out/merged.db" --case "$case_id" >"$out/merged_replay.txt" 2>&1
        report "cpreplay of merged case $case_id: rc=$? $(head -n 1 "$out/merged_replay.txt")"
      fi
      timeout 250 python3 tools/bench/jobs_bench.py --cprecord "$b/tools/cprecord" \
        --jobs "${CPRR_BENCH_JOBS:-4}" --repeat 5 >"$out/jobs_bench.txt" 2>&1
      report "jobs_bench (cpu backend) rc=$?" "$(tail -n 5 "$out/jobs_bench.txt")"
      ;;
    pyjobs)
      # The Python corpus's W=2 cases on cuda in both modes with --jobs 1 and --jobs as many as
      # the GPUs allow: the wall time of each and every status and verdict compared.
      python_module || continue
      jobs_side_by_side pyjobs "Python corpus" --python corpus/python --filter '@2$'
      ;;
    launcher)
      # On cuda: the W=2 corpus in both modes with ranks started through a launcher (the
      # stand-in mpirun: this machine has no MPI) connecting back over TCP, next to local ranks.
      for how in local launched; do
        args=()
        [ $how = launched ] && args=(--launcher mpirun --launcher-path "$PWD/tools/device/stand_in_mpirun.sh")
        start=$(date +%s%N)
        timeout 280 "$b/tools/cprecord" --backend cuda --mode both --json --db "$out/launcher_$how.db" \
          --filter '@2$' "${args[@]}" >"$out/launcher_$how.json" 2>"$out/launcher_$how.err"
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        report "$(printf 'corpus@2 cuda, %-8s ranks: rc=%-3s %7d ms' $how $rc $ms)"
      done
      python3 tools/device/same_statuses.py "$out/launcher_local.json" "$out/launcher_launched.json" \
        >"$out/launcher_table.txt" 2>&1
      report "$(tail -n 3 "$out/launcher_table.txt")"
      ;;
    faults)
      # A rank that throws (C++) or raises (Python) before a collective on cuda: its
      # fail at once, the others released from NCCL (or the staged Gloo) and the world replaced;
      # a case's leftover process killed and named (fault/leave_process in the fixture worker).
      timeout 300 "$b/tools/cprecord" --backend cuda --mode both --json \
        --filter '^(fault/|healthy/noop@)' --db "$out/faults_cuda.db" >"$out/faults_cuda.json" \
        2>"$out/faults_cuda.err"
      report "faults cuda (C++) rc=$?" "$(python3 tools/device/faults_table.py "$out/faults_cuda.json" 2>&1)"
      timeout 120 "$b/tools/cprecord" --worker "$b/tests/cprr_fixture_worker" --backend cuda \
        --json --filter '^test/(throw_on_one_rank|leave_process)' --db "$out/faults_fixture.db" \
        >"$out/faults_fixture.json" 2>"$out/faults_fixture.err"
      report "faults cuda (fixture) rc=$?" "$(python3 tools/device/faults_table.py "$out/faults_fixture.json" 2>&1)"
      python_module || continue
      timeout 300 "$b/tools/cprecord" --python corpus/python --backend cuda --mode both --json \
        --filter '^fault/' --db "$out/faults_python.db" >"$out/faults_python.json" \
        2>"$out/faults_python.err"
      report "faults cuda (Python) rc=$?" "$(python3 tools/device/faults_table.py "$out/faults_python.json" 2>&1)"
      ;;
    examples)
      # examples/, built against the installed package (tools/device/build.sh), on cuda in both
      # modes: every example case as expected (a pass; the native-kernel race named), fresh and
      # pooled, with the race and its fix printed.
      timeout 250 "$b/tools/cprecord" --worker "$b/examples-installed/my_cases" --backend cuda \
        --mode both --json --db "$out/examples.db" >"$out/examples.json" 2>"$out/examples.err"
      rc=$?
      python3 tools/device/examples_table.py "$out/examples.json" >"$out/examples_table.txt" 2>&1
      report "examples (installed package) on cuda: cprecord rc=$rc" "$(cat "$out/examples_table.txt")"
      ;;
    triage)
      # The corpus at CPRR_TRIAGE_FILTER (default W=2) recorded on cuda in both modes, then
      # `cpreplay --all` over that run: every case it replays gets its seeded verdict.
      tdir="$out/triage"
      mkdir -p "$tdir"
      timeout 200 "$b/tools/cprecord" --backend cuda --mode both --json --db "$tdir/run.db" \
        --filter "${CPRR_TRIAGE_FILTER:-@2\$}" >"$tdir/record.json" 2>"$tdir/record.err"
      report "triage: cprecord rc=$?"
      start=$(date +%s%N)
      timeout 330 "$b/tools/cpreplay" --db "$tdir/run.db" --all --json >"$tdir/all.json" 2>"$tdir/all.err"
      rc=$?
      report "triage: cpreplay --all rc=$rc in $((($(date +%s%N) - start) / 1000000)) ms"
      python3 tools/device/triage_table.py "$tdir/record.json" "$tdir/all.json" >"$tdir/table.txt" 2>&1
      report "== triage (cpreplay --all on cuda)" "$(cat "$tdir/table.txt")"
      tar -czf "$out/triage.tgz" -C "$out" triage && rm -rf "$tdir"
      ;;
    races)
      # The seeded stream races (or, with CPRR_RACE_FILTER, any seeded bugs) and their twins:
      # recorded (5 repeats, both modes), each replayed.
      for backend in ${CPRR_RACE_BACKENDS:-cuda cpu}; do
        rdir="$out/races_$backend"
        mkdir -p "$rdir"
        timeout 300 "$b/tools/cprecord" --backend $backend --mode both --repeat 5 --json \
          --db "$rdir/run.db" --filter "${CPRR_RACE_FILTER:-^(bug|fixed)/(cp_maxlogit_race|pinned_staging_reuse|alltoallv_skipped_wait|use_after_free_across_streams)@2\$}" \
          >"$rdir/record.json" 2>"$rdir/record.err"
        for id in $(python3 -c 'import json,sys; print(" ".join(str(c["id"]) for c in json.load(open(sys.argv[1]))["cases"]))' "$rdir/record.json"); do
          timeout 120 "$b/tools/cpreplay" --db "$rdir/run.db" --case "$id" --json >"$rdir/$id.json" 2>"$rdir/$id.err"
        done
        python3 tools/device/race_table.py "$rdir/record.json" "$rdir" >"$rdir/table.txt" 2>&1
        report "== races on $backend" "$(cat "$rdir/table.txt")"
        tar -czf "$out/races_$backend.tgz" -C "$out" "races_$backend" && rm -rf "$rdir"
      done
      ;;
    symmetric)
      # On real NCCL windows (W=2): the allocator-order, uninitialized-read and
      # collective-mismatch bugs with their twins, recorded with NCCL's tuning log on (rank 0 logs
      # the kernel of each collective) and triaged; once as NCCL chooses, once forcing the
      # symmetric load/store kernel, which reads peers' windows at this rank's offset.
      for run in default forced_ld; do
        sdir="$out/symmetric_$run"
        mkdir -p "$sdir"
        env_extra=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING)
        filter='^(bug|fixed)/(symmetric_address_order|collective_size_mismatch|uninitialized_read)@2$'
        if [ $run = forced_ld ]; then
          env_extra+=(NCCL_SYM_KERNEL=AllReduce_RSxLD_AGxST)
          filter='^(bug|fixed)/symmetric_address_order@2$'
        fi
        env "${env_extra[@]}" timeout 250 "$b/tools/cprecord" --backend cuda --mode both --json \
          --db "$sdir/run.db" --filter "$filter" >"$sdir/record.json" 2>"$sdir/record.err"
        report "symmetric $run: cprecord rc=$?"
        env "${env_extra[@]}" timeout 200 "$b/tools/cpreplay" --db "$sdir/run.db" --all --json \
          >"$sdir/all.json" 2>"$sdir/all.err"
        report "symmetric $run: cpreplay --all rc=$?"
        python3 tools/device/symmetric_table.py "$sdir" >"$sdir/table.txt" 2>&1
        report "== symmetric ($run)" "$(cat "$sdir/table.txt")"
      done
      ;;
    trace)
      # The --trace timeline on CUDA events: a race case (streams, an all-reduce, a race) and a
      # healthy collective case recorded with --trace, the race case replayed with --trace; every
      # file checked against the trace-event format.
      tdir="$out/trace"
      mkdir -p "$tdir"
      timeout 200 "$b/tools/cprecord" --backend cuda --mode both --json --db "$tdir/run.db" \
        --filter '^(bug|fixed)/cp_maxlogit_race@2$' --trace "$tdir/recorded" \
        >"$tdir/record.json" 2>"$tdir/record.err"
      report "trace: cprecord --trace rc=$?"
      bug=$(python3 -c 'import json,sys; print([c["id"] for c in json.load(open(sys.argv[1]))["cases"] if c["label"].startswith("bug/")][0])' "$tdir/record.json")
      timeout 200 "$b/tools/cpreplay" --db "$tdir/run.db" --case "$bug" --mode fresh \
        --trace "$tdir/replay-case-$bug.json" --json >"$tdir/replay.json" 2>"$tdir/replay.err"
      report "trace: cpreplay --trace rc=$?"
      python3 tools/device/trace_check.py "$tdir"/recorded/*.json "$tdir/replay-case-$bug.json" \
        >"$tdir/table.txt" 2>&1
      report "trace check rc=$?" "$(cat "$tdir/table.txt")"
      ;;
    bench)
      bench device_hash 120
      # W=2 and W=4 whatever the GPU count: with fewer GPUs than ranks they share them (Gloo,
      # staged through host memory). CPRR_BENCH_COLLECTIVES=gloo times the staged path on a GPU
      # per rank, for the side-by-side with NCCL.
      bench gpu 500 --cases "${CPRR_BENCH_CASES:-20}" --standby 4 --world-size 2 4 \
        --collectives "${CPRR_BENCH_COLLECTIVES:-auto}" \
        --torch-script tools/bench/torch_allreduce.py --torch-runs "${CPRR_TORCH_RUNS:-3}"
      bench dispatch 200 --backend cuda --pool-runs 500 --fresh-runs 10 \
        --collectives "${CPRR_BENCH_COLLECTIVES:-auto}"
      # Every figure from one step: the world start breakdown and the fresh suite with and
      # without standby worlds come from bench_gpu above, recording overhead from here.
      bench recording 300 --backend cuda --runs 20
      ;;
    startbench)
      # What a fresh world pays at W=2 and W=4 (a GPU per rank where there are enough),
      # step by step, fresh against pooled and standby (cprr_bench_gpu); a Python case's cost on
      # cuda with the empty case pooled (cprr_bench_python); the start-up steps' GPU test.
      timeout 120 "$b/tests/cprr_recorder_gpu_tests" --gtest_filter='CudaContext.*' \
        >"$out/cuda_context.log" 2>&1
      report "CudaContext gpu tests rc=$? $(grep -cE '^\[       OK \]' "$out/cuda_context.log") passed" \
        "$(grep -E '^\[  (FAILED|SKIPPED) \].*\(' "$out/cuda_context.log")"
      bench gpu 300 --cases "${CPRR_BENCH_CASES:-10}" --standby 4 --world-size 2 4 \
        --torch-script tools/bench/torch_allreduce.py --torch-runs 1
      python_module || continue
      bench python 200 --backend cuda --cases 3 --empty-cases 200 --torch-runs 0 \
        --case-file tools/bench/python_bench_cases.py
      ;;
    pybench)
      # A Python case's cost fresh (forked from the template / spawned / standby),
      # pooled, and one torchrun per case, ranks sharing the GPUs there are.
      python_module || continue
      bench python 560 --backend cuda --cases "${CPRR_BENCH_CASES:-10}" \
        --case-file tools/bench/python_bench_cases.py \
        --torch-script tools/bench/torch_allreduce.py --torch-runs "${CPRR_TORCH_RUNS:-3}"
      ;;
    recording)
      # Recording overhead on cuda, cp_ring with 256 MiB captures and 1000 small ones,
      # with its breakdown (hash, transfer, decode, store).
      bench recording 400 --backend cuda --runs 20
      ;;
    *) echo "unknown step '$step' (tests, corpus, races, symmetric, trace, bench, recording, standby, launcher, examples, triage, python, pybench, mismatch, descriptors, faults, ...)" >&2; exit 2 ;;
  esac
done

echo "== summary"
echo "GPUs: $gpus ($(head -n 1 "$out/gpus.txt"))"
printf '%s\n' "${summary[@]}"
