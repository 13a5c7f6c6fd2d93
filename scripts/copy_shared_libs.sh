#!/usr/bin/env bash
# Copies the shared libraries FILE... load (ldd), and those they load, into DEST under their
# sonames, leaving out what every Linux host has (glibc, libstdc++, libgcc_s, zlib, OpenSSL) and
# the CUDA libraries (the GPU machine has its own). Used for grpc++ and the shared libprotobuf,
# which Debian ships without static archives: scripts/build_h200.sh puts them in build-h200/bin/lib,
# scripts/make_sysroot.sh in the sysroot; scripts/gpu_check.sh adds that folder to LD_LIBRARY_PATH.
#
#   scripts/copy_shared_libs.sh build-h200/bin/lib build-h200/gpuopt
set -euo pipefail
DEST=$1
shift
mkdir -p "$DEST"
skip='/(libc|libm|libdl|librt|libpthread|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz|libssl|libcrypto|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnvidia-ml)\.so'
for f in "$@"; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  if echo "$path" | grep -qE "$skip"; then continue; fi
  cp -L "$path" "$DEST/$soname"
done
du -sh "$DEST" | awk '{ print "shared libraries: " $1 " in '"$DEST"'" }'
