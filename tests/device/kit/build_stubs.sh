#!/usr/bin/env bash
# Builds the stub libraries a rehearsal of the device kit runs on (tests/stubs), from their
# sources and CUDA's headers, into one folder: the runtime (with its "GPU"), the driver, cuBLAS,
# cuBLASLt and libcupti. The kit builds its own rather than borrow a build tree's, so that a
# rehearsal needs nothing of a build but the sonde it checks.
#   build_stubs.sh CUDA_INCLUDE_DIR OUT_DIR
set -euo pipefail
inc="$1" out="$2"
src=$(cd "$(dirname "$0")/../../stubs" && pwd)
mkdir -p "$out"
cflags=(-O1 -fPIC -shared -I"$inc" -Wno-deprecated-declarations)

# lib NAME SOVERSION LANG SOURCES... [-- LINK ARGS]: the real soname and, as the real library
# has, symbols versioned by it.
lib() {
  local name=$1 so=$2 cc=$3; shift 3
  local file="lib$name.so.$so" map="$out/$name.map"
  echo "lib$name.so.$so { global: *; };" >"$map"
  "$cc" "${cflags[@]}" -o "$out/$file" -Wl,-soname,"$file" -Wl,--version-script="$map" "$@"
  ln -sf "$file" "$out/lib$name.so"
}
cc -O1 -fPIC -shared -I"$inc" -o "$out/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$src/gpu/cuda_stub.c"
lib cudart 13 cc "$src/gpu/cudart_stub.c" "$src/gpu/cudart_device.c" -ldl -pthread \
  -Wl,-rpath,'$ORIGIN'
lib cublasLt 13 cc "$src/gpu/cublaslt_stub.c"
lib cublas 13 cc "$src/gpu/cublas_stub.c" -L"$out" -lcublasLt -lcudart -Wl,-rpath,'$ORIGIN'
# libcupti, as sonde opens it (by path: SONDE_CUPTI_LIBRARY); C++20, hidden but its API.
c++ -std=c++20 -O1 -fPIC -shared -fvisibility=hidden -I"$inc" -o "$out/libcupti.so.13" \
  -Wl,-soname,libcupti.so.13 "$src/cupti/cupti_stub.cpp" "$src/cupti/cupti_stub_graphs.cpp" \
  "$src/cupti/cupti_stub_profiler.cpp" -pthread
