#!/usr/bin/env bash
# Packs the Debian -dev files gpuopt builds against (headers, static libraries, protoc, CMake
# package files) into .device/sys/sysroot.tgz, plus the pinned ONNX node tests, so
# scripts/build_on_gpu_machine.sh can build there. Boost is cut to the directories our sources
# include (found with g++ -M).
set -euo pipefail
cd "$(dirname "$0")/.."
S=$(mktemp -d)/sysroot
mkdir -p "$S/usr/include" "$S/usr/lib/x86_64-linux-gnu/cmake" "$S/usr/bin" "$S/usr/share/cmake"
boost=$(for f in $(grep -l 'boost/' -r src tests --include='*.cpp'); do g++ -std=c++20 -M -Iinclude -Isrc -Ibuild/generated "$f" 2>/dev/null; done \
  | tr ' \\' '\n\n' | grep '^/usr/include/boost' | sed 's|/usr/include/||' | awk -F/ '{ if (NF>2) print $1"/"$2; else print $0 }' | sort -u)
(cd /usr/include && cp -a --parents $boost boost/*.hpp fmt CLI nlohmann google gtest gmock curses.h ncurses.h ncurses_dll.h \
  term.h unctrl.h termcap.h term_entry.h "$S/usr/include/")
cp -L /usr/include/x86_64-linux-gnu/cblas.h /usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h "$S/usr/include/"
L=/usr/lib/x86_64-linux-gnu
cp -a $L/libprotobuf.a $L/libgtest.a $L/libgtest_main.a $L/libgmock.a $L/libgmock_main.a $L/libncursesw.a $L/libtinfo.a "$S$L/"
cp -L $L/libprotoc.so.32 $L/libprotobuf.so.32 $L/libfmt.so.9.1.0 $L/libgfortran.so.5 "$S$L/"
mkdir -p "$S$L/openblas-pthread" && cp -L $L/openblas-pthread/libopenblas.a "$S$L/openblas-pthread/"
cp -a $L/cmake/fmt $L/cmake/GTest "$S$L/cmake/"
cp -a /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$S/usr/share/cmake/"
cp -L /usr/bin/protoc "$S/usr/bin/"
# The cuDNN frontend's headers, pinned into .venv by scripts/deps.sh (they include one another as ../include/X).
fe=$(ls -d .venv/lib/python3*/site-packages/include | head -1)
mkdir -p "$S/usr/include/cudnn_frontend_pkg/include" && cp -a "$fe"/cudnn_frontend* "$fe"/cudnn_backend_base.h "$S/usr/include/cudnn_frontend_pkg/include/"
mkdir -p .device/sys
tar czf .device/sys/sysroot.tgz -C "$(dirname "$S")" sysroot
node=$(ls -d .venv/lib/python3*/site-packages/onnx/backend/test/data/node | head -1)
tar czf .device/sys/node.tgz -C "$(dirname "$node")" node
du -sh .device/sys/*
