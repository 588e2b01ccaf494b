#!/usr/bin/env bash
# Runs on the GPU machine (from the repo root, .device/stage carried): builds the `_cprr` module
# for the Python there (its own version; torch is installed for it) and links it with the staged
# libcprr_pyrank.so built by tools/device/build.sh, then writes cprr-pyworker for that Python.
# Only python/native/bindings.cpp is compiled here: it includes rank_runtime.h and pybind11 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
stage=$PWD/.device/stage
pkg=$stage/build/python/cprr
py=${PYTHON:-$(command -v python3)}
[ -f "$pkg/libcprr_pyrank.so" ] || { echo "no $pkg/libcprr_pyrank.so: run tools/device/build.sh" >&2; exit 2; }
suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
includes=$("$py" -m pybind11 --includes 2>/dev/null ||
  "$py" -c 'import sysconfig, torch, os; print("-I" + sysconfig.get_paths()["include"], "-I" + os.path.join(os.path.dirname(torch.__file__), "include"))')
# shellcheck disable=SC2086
g++ -O2 -std=c++17 -shared -fPIC $includes -I. python/native/bindings.cpp \
  -L"$pkg" -lcprr_pyrank -Wl,-rpath,'$ORIGIN' -o "$pkg/_cprr$suffix"
build_path=$(cat "$stage/build_path")
sed -e "s|@CPRR_PYWORKER_PYTHON@|$py|" -e "s|@CPRR_PYWORKER_PATH@|$build_path/python|" \
  python/cprr-pyworker.in >"$stage/build/tools/cprr-pyworker"
chmod +x "$stage/build/tools/cprr-pyworker"
echo "built $pkg/_cprr$suffix for $("$py" --version 2>&1)"
