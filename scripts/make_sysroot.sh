#!/usr/bin/env bash
# Packs the Debian -dev files gpuopt builds against (headers, static libraries, protoc, CMake
# package files, grpc++ and protobuf as shared libraries) into .device/sys/sysroot.tar.xz, plus the pinned ONNX node tests, so
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
# Image codecs (ImageDecoder): libpng, libjpeg-turbo, zlib headers; jconfig.h from the multiarch dir.
cp -L /usr/include/png.h /usr/include/pngconf.h /usr/include/pnglibconf.h /usr/include/zlib.h /usr/include/zconf.h \
  /usr/include/jpeglib.h /usr/include/jmorecfg.h /usr/include/jerror.h /usr/include/x86_64-linux-gnu/jconfig.h "$S/usr/include/"
L=/usr/lib/x86_64-linux-gnu
cp -L $L/libpng16.a $L/libjpeg.a $L/libz.a "$S$L/"
# The LLM tokenizer (src/llm/tok_*): PCRE2 (pre-tokenizer regexes) and utf8proc (NFC/NFKC).
cp -L /usr/include/pcre2.h /usr/include/utf8proc.h "$S/usr/include/"
cp -L $L/libpcre2-8.a $L/libutf8proc.a "$S$L/"
cp -a $L/libgtest.a $L/libgtest_main.a $L/libgmock.a $L/libgmock_main.a $L/libncursesw.a $L/libtinfo.a "$S$L/"
cp -L $L/libprotoc.so.32 $L/libprotobuf.so.32 $L/libfmt.so.9.1.0 $L/libgfortran.so.5 "$S$L/"
mkdir -p "$S$L/openblas-pthread" && cp -L $L/openblas-pthread/libopenblas.a "$S$L/openblas-pthread/"
cp -a $L/cmake/fmt $L/cmake/GTest "$S$L/cmake/"
cp -a /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$S/usr/share/cmake/"
cp -L /usr/bin/protoc "$S/usr/bin/"
# The cuDNN frontend's headers, pinned into .venv by scripts/deps.sh (they include one another as ../include/X).
fe=$(ls -d .venv/lib/python3*/site-packages/include | head -1)
mkdir -p "$S/usr/include/cudnn_frontend_pkg/include" && cp -a "$fe"/cudnn_frontend* "$fe"/cudnn_backend_base.h "$S/usr/include/cudnn_frontend_pkg/include/"
# CUTLASS's headers (cute and cutlass), pinned into .venv by scripts/deps.sh.
cl=$(ls -d .venv/lib/python3*/site-packages/cutlass_library/source/include | head -1)
mkdir -p "$S/usr/include/cutlass_pkg" && cp -a "$cl" "$S/usr/include/cutlass_pkg/"
# oneDNN (the fast CPU backend's convolutions and GEMMs), pinned into .venv by scripts/deps.sh, and
# the GNU OpenMP runtime it loads.
mkdir -p "$S/usr/include/oneapi" && cp -a .venv/include/oneapi/dnnl "$S/usr/include/oneapi/"
cp -L .venv/lib/libdnnl.so.3 $L/libgomp.so.1 "$S$L/"
# grpc++ (Debian ships it shared only) and the shared libprotobuf it needs: the headers our gRPC
# sources include (g++ -M), the libraries with the ones they load, link names for what CMake
# links by name (no gRPC CMake package here: CMakeLists.txt finds the libraries directly), and
# protoc's gRPC plugin.
grpc_srcs="src/server/grpc_server.cpp src/server/grpc_codec.cpp src/cli/perf_client.cpp"
grpc_hdrs=$(for f in $grpc_srcs; do g++ -std=c++20 -M -Iinclude -Isrc -Ibuild/generated -Ibuild/generated/triton "$f" 2>/dev/null; done \
  | tr ' \\' '\n\n' | grep -E '^/usr/include/(grpc|grpcpp|grpc\+\+|absl|upb|re2)/' | sed 's|/usr/include/||' | cut -d/ -f1 | sort -u)
(cd /usr/include && cp -a --parents $grpc_hdrs "$S/usr/include/")
scripts/copy_shared_libs.sh "$S$L" $L/libgrpc++.so $L/libprotobuf.so /usr/bin/grpc_cpp_plugin >/dev/null
cp -L $L/libgrpc++.so.1.51 $L/libprotobuf.so.32 "$S$L/"
for l in grpc++ grpc gpr absl_synchronization protobuf; do
  ln -sf "$(basename "$(ls $S$L/lib$l.so.* | head -1)")" "$S$L/lib$l.so"
done
cp -L /usr/bin/grpc_cpp_plugin "$S/usr/bin/"
mkdir -p .device/sys
# xz: half gzip's size, which leaves room in a device call's 64 MiB for the working tree.
rm -f .device/sys/sysroot.tgz
tar cf - -C "$(dirname "$S")" sysroot | xz -9 -T0 > .device/sys/sysroot.tar.xz
node=$(ls -d .venv/lib/python3*/site-packages/onnx/backend/test/data/node | head -1)
tar czf .device/sys/node.tgz -C "$(dirname "$node")" node
du -sh .device/sys/*
