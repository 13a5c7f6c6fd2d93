#!/usr/bin/env bash
# Builds the static sm_90 binaries ON the GPU machine (16 cores), which has the CUDA toolkit,
# cmake and ninja but none of Debian's -dev packages: those come as a sysroot tarball made here
# by scripts/make_sysroot.sh (carry .device/sys). Output: build-h200/bin, as scripts/build_h200.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE_SYS=${DEVICE_SYS:-.device/sys}
SYS=/tmp/gpuopt-sysroot
# sysroot.tar.xz (make_sysroot.sh), or an older sysroot.tgz; Python's tarfile reads either, with
# or without an xz binary on the machine.
T=$DEVICE_SYS/sysroot.tar.xz
[ -f "$T" ] || T=$DEVICE_SYS/sysroot.tgz
sum=$(md5sum "$T" | cut -d' ' -f1)
if [ ! -d "$SYS/usr" ] || [ "$(cat "$SYS/.sum" 2>/dev/null)" != "$sum" ]; then
  rm -rf "$SYS" /tmp/sysroot
  mkdir -p /tmp && python3 -c 'import sys, tarfile as t; t.open(sys.argv[1]).extractall("/tmp", **({"filter": "fully_trusted"} if hasattr(t, "fully_trusted_filter") else {}))' "$T" &&
    mv /tmp/sysroot "$SYS" && echo "$sum" > "$SYS/.sum"
fi
U=$SYS/usr
L=$U/lib/x86_64-linux-gnu
# protoc, grpc_cpp_plugin, and the linker resolving the libraries grpc++ itself loads.
export LD_LIBRARY_PATH="$L:${LD_LIBRARY_PATH:-}"
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUOPT_CUDA=ON -DGPUOPT_CUDA_ARCHS=90 -DGPUOPT_STATIC=ON \
  -DCMAKE_PREFIX_PATH="$U;$L/cmake;$U/share/cmake" \
  -DGPUOPT_GRPC_CPP_PLUGIN="$U/bin/grpc_cpp_plugin" \
  -DProtobuf_INCLUDE_DIR="$U/include" -DProtobuf_LIBRARY="$L/libprotobuf.so" -DProtobuf_PROTOC_EXECUTABLE="$U/bin/protoc" \
  -DBoost_INCLUDE_DIR="$U/include" -DBoost_NO_BOOST_CMAKE=ON -DCLI11_INCLUDE="$U/include" \
  -DCURSES_INCLUDE_PATH="$U/include" -DCURSES_LIBRARY="$L/libncursesw.a" \
  -DGPUOPT_NCURSESW_A="$L/libncursesw.a" -DGPUOPT_TINFO_A="$L/libtinfo.a" \
  -DGPUOPT_OPENBLAS_A="$L/openblas-pthread/libopenblas.a" -DGPUOPT_CUDNN_FRONTEND_INCLUDE="$U/include/cudnn_frontend_pkg/include" \
  -DGPUOPT_CUTLASS_INCLUDE="$U/include/cutlass_pkg/include" \
  -DGPUOPT_DNNL_ROOT="$U" \
  -DPNG_PNG_INCLUDE_DIR="$U/include" -DPNG_LIBRARY="$L/libpng16.a" -DZLIB_INCLUDE_DIR="$U/include" \
  -DZLIB_LIBRARY="$L/libz.a" -DJPEG_INCLUDE_DIR="$U/include" -DJPEG_LIBRARY="$L/libjpeg.a" > "${OUT:-/tmp}/cmake-configure.log" 2>&1 \
  || { tail -40 "${OUT:-/tmp}/cmake-configure.log"; exit 1; }
# TARGETS (e.g. "gpuopt backend_ops"): only those, for a quick check; default all.
cmake --build build-h200 -j"$(nproc)" ${TARGETS:+--target $TARGETS} 2>&1 | grep -E "error|FAILED|warning: undefined" | head -40 || true
test -x build-h200/gpuopt
mkdir -p build-h200/bin
for f in build-h200/gpuopt build-h200/backend_ops build-h200/gpuopt_conformance build-h200/tests/test_*; do
  [ -x "$f" ] && [ -f "$f" ] && cp "$f" build-h200/bin/
done
cp build-h200/tests/*.so build-h200/bin/ 2>/dev/null || true
# The sysroot's shared libraries that gpuopt loads (grpc++, protobuf, ...); gpu_check.sh puts
# build-h200/bin/lib on LD_LIBRARY_PATH.
scripts/copy_shared_libs.sh build-h200/bin/lib build-h200/gpuopt
[ -f "$DEVICE_SYS/node.tgz" ] && cp "$DEVICE_SYS/node.tgz" build-h200/bin/onnx-node-tests.tgz
echo "built: $(ls build-h200/bin | tr '\n' ' ')"
