#!/usr/bin/env bash
# Runs on the GPU machine (from the repo root, .device/stage carried): builds the `_cprr` module
# for the Python there (its own version; torch is installed for it) and links it with the staged
# libcprr_pyrank.so built by tools/device/build.sh, then writes cprr-pyworker for that Python.
# Only python/native/bindings.cpp is compiled here: it includes rank_runtime.h and
# case_registration.h (plain types; data/case_info.h's are C++20) and pybind11 only.
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
g++ -O2 -std=c++20 -shared -fPIC $includes -I. python/native/bindings.cpp \
  -L"$pkg" -lcprr_pyrank -Wl,-rpath,'$ORIGIN' -o "$pkg/_cprr$suffix"
# The C++ op capture (python/native/capture) against the torch this Python imports, with CUDA
# (its current streams, record_stream's stream): its files compiled side by side, then linked
# with torch's libraries. Without it, cprr captures with the Python dispatch mode (and says so).
torch_dir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$("$py" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
cuda_include=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../include
objs=$(mktemp -d)
# -DNDEBUG as torch's release builds are: its RecordFunction has debug-only members, and the
# capture must see the library's layout (python/CMakeLists.txt does the same).
capture_flags=(-O2 -fPIC -DNDEBUG -D_GLIBCXX_USE_CXX11_ABI="$abi" -DCPRR_TORCH_CUDA=1 -I. -isystem "$torch_dir/include"
  -isystem "$torch_dir/include/torch/csrc/api/include" -isystem "$cuda_include")
for std in c++17 c++20; do
  pids=()
  for f in python/native/capture/*.cpp; do
    # shellcheck disable=SC2086
    g++ -std=$std "${capture_flags[@]}" $includes -c "$f" -o "$objs/$(basename "$f" .cpp).o" \
      2>"$objs/$(basename "$f" .cpp).err" &
    pids+=($!)
  done
  ok=1
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  [ $ok = 1 ] && break
done
# Not linked with libcprr_pyrank.so (python/CMakeLists.txt says why).
if [ $ok = 1 ] && g++ -shared "$objs"/*.o -L"$torch_dir/lib" -ltorch_python \
    -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,-rpath,'$ORIGIN' -Wl,-rpath,"$torch_dir/lib" \
    -o "$pkg/_cprr_torch$suffix"; then
  echo "built $pkg/_cprr_torch$suffix (C++ op capture, -std=$std) for torch $("$py" -c 'import torch; print(torch.__version__)')"
else
  rm -f "$pkg/_cprr_torch$suffix"
  echo "the C++ op capture did not build: the Python dispatch mode captures" >&2
  cat "$objs"/*.err | head -40 >&2
fi
rm -rf "$objs"
build_path=$(cat "$stage/build_path")
sed -e "s|@CPRR_PYWORKER_PYTHON@|$py|" -e "s|@CPRR_PYWORKER_PATH@|$build_path/python|" \
  python/cprr-pyworker.in >"$stage/build/tools/cprr-pyworker"
chmod +x "$stage/build/tools/cprr-pyworker"
echo "built $pkg/_cprr$suffix for $("$py" --version 2>&1)"
