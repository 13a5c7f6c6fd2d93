#!/usr/bin/env bash
# Installs what gpuopt needs to build and test on Debian 12: Debian packages, then the pinned
# Python packages of requirements.txt into ./.venv. Safe to run again (skips what is there).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build ccache git pkg-config
      libprotobuf-dev protobuf-compiler libcli11-dev libfmt-dev nlohmann-json3-dev
      libboost-dev libncurses-dev libgtest-dev libbenchmark-dev libopenblas-dev
      libgrpc++-dev protobuf-compiler-grpc libpng-dev libjpeg62-turbo-dev zlib1g-dev
      python3 python3-venv python3-pip prometheus tmux curl clang libclang-rt-14-dev
      libpcre2-dev libutf8proc-dev)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: apt: ${#missing[@]} Debian package(s) missing: ${missing[*]}"
  echo "deps: apt: updating the package lists"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # apt's own lines, filtered to what says where it is: the download size, then one line per
  # package unpacked and set up (dependencies included).
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 |
    { grep --line-buffered -E '^(Need to get|After this operation|Setting up|E:)' || true; } | sed -u 's/^/deps: apt: /'
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "deps: apt-get install failed (see above)" >&2; exit 1; }
  echo "deps: apt: done"
fi
# kubectl renders deploy/kubernetes' Kustomize overlays in the deploy tests: Debian's
# kubernetes-client, unless a kubectl is already installed (another package owns the path then).
if ! command -v kubectl >/dev/null 2>&1; then
  echo "deps: installing Debian package kubernetes-client (kubectl)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null
fi
# The Debian prometheus package starts a system service; the tests start their own on loopback.
$SUDO systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true

stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python3 ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "deps: pip: installing $(grep -cE '^[A-Za-z0-9]' requirements.txt) pinned Python packages (requirements.txt) into .venv"
  python3 -m venv .venv
  .venv/bin/python3 -m pip install -q --upgrade pip >/dev/null
  # One line per package pip collects, then its summary.
  .venv/bin/python3 -m pip install --progress-bar off -r requirements.txt 2>&1 |
    { grep --line-buffered -E '^(Collecting|Successfully installed|ERROR)' || true; } | sed -u 's/^/deps: pip: /'
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "deps: pip install failed (see above)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
# NVIDIA's header-only libraries, pinned (without their Python dependencies, which gpuopt does
# not use): the cuDNN frontend (graph API: SDPA flash attention) under .venv/.../include, and
# CUTLASS (Hopper GEMMs with fused epilogues) under .venv/.../cutlass_library/source/include.
HEADER_PKGS="nvidia-cudnn-frontend==1.32.0 nvidia-cutlass==4.2.0.0"
hstamp=.venv/.headers.pinned
if [ "$(cat "$hstamp" 2>/dev/null)" != "$HEADER_PKGS" ]; then
  echo "deps: installing pinned header-only packages into .venv: $HEADER_PKGS"
  .venv/bin/python3 -m pip install -q --no-deps $HEADER_PKGS
  echo "$HEADER_PKGS" > "$hstamp"
fi
