#!/usr/bin/env bash
# Builds cprr with the CUDA backend on the development machine (no GPU needed) and stages what the
# GPU machine needs under .device/stage (git-ignored): the binaries at their build-tree paths,
# without debug info, and the shared libraries the GPU machine lacks (Gloo, fmt, ...; it has
# glibc, libstdc++, NCCL and the driver). Then run tools/device/run_gpu_checks.sh there with
# .device/stage carried (../shared/design/DEVICE.md, way (a)).
#
#   tools/device/build.sh            # build + stage
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
tools/setup.sh >/dev/null
cmake -S . -B build -DCPRR_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)"

# examples/ as a user builds it: against the installed package (find_package(cprr)) alone.
prefix=$root/.device/prefix
rm -rf "$prefix"
cmake --install build --prefix "$prefix" >/dev/null
cmake -S examples -B build/examples-installed -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/examples-installed -j"$(nproc)" >/dev/null

stage=.device/stage
rm -rf "$stage"
mkdir -p "$stage/lib"
bins=(tools/cpworker tools/cprecord tools/cpreplay tests/cprr_fixture_worker
      examples-installed/my_cases)
for b in build/tests/cprr_*_gpu_tests build/tools/bench/cprr_bench_*; do
  [ -x "$b" ] && bins+=("${b#build/}")
done
for b in "${bins[@]}"; do
  mkdir -p "$stage/build/$(dirname "$b")"
  strip --strip-debug -o "$stage/build/$b" "build/$b"
done

# The Python package: its files and libcprr_pyrank.so; the `_cprr` module is built there for the
# Python there (tools/device/build_python.sh).
libs=()
if [ -f build/python/cprr/libcprr_pyrank.so ]; then
  # Every room of the package, each file at its place.
  (cd build/python && find cprr -name '*.py' -o -name '*.pyi') | while read -r f; do
    mkdir -p "$stage/build/python/$(dirname "$f")"
    cp "build/python/$f" "$stage/build/python/$f"
  done
  strip --strip-debug -o "$stage/build/python/cprr/libcprr_pyrank.so" build/python/cprr/libcprr_pyrank.so
  libs+=(build/python/cprr/libcprr_pyrank.so)
fi

# Libraries to carry: everything the binaries load except what every Linux/CUDA host has.
keep='libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|libnccl|libcuda'
{ for b in "${bins[@]}"; do ldd "build/$b"; done; for l in "${libs[@]}"; do ldd "$l"; done; } | awk '/=> \//{print $3}' | sort -u |
  grep -vE "$keep" | while read -r lib; do cp -L "$lib" "$stage/lib/"; done

# The test binaries name the worker and CLIs by absolute build-tree path; the GPU machine links
# this path to the staged tree.
echo "$root/build" >"$stage/build_path"
echo "staged $(du -sh "$stage" | cut -f1) in $stage: ${#bins[@]} binaries, $(ls "$stage/lib" | wc -l) libraries"
