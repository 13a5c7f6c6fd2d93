#!/bin/sh
# Entrypoint of the gpuopt image (deploy/Dockerfile).
#
#   (no arguments)        gpuopt serve on $GPUOPT_MODEL_REPOSITORY with the ports below
#   --flag ...            the same, with these `gpuopt serve` flags added (--precision fp16, ...)
#   <subcommand> ...      any other gpuopt subcommand as is (exporter, info, perf, ...)
#   <program> ...         any other program (sh, for a look inside)
#
# Environment (defaults from the Dockerfile): GPUOPT_MODEL_REPOSITORY (/models), GPUOPT_HTTP_PORT
# (8000), GPUOPT_GRPC_PORT (8001, passed when this gpuopt serves gRPC), GPUOPT_METRICS_PORT (8002),
# GPUOPT_EXIT_TIMEOUT_SECS (25: the SIGTERM drain, below Kubernetes' grace period),
# GPUOPT_HTTP_ADDRESS (0.0.0.0), GPUOPT_BIN (the gpuopt binary; tests point it at a build).
# gpuopt replaces this shell (exec), so SIGTERM from `docker stop` or the kubelet reaches it.
set -eu

bin=${GPUOPT_BIN:-/opt/gpuopt/bin/gpuopt}
die() {
  echo "gpuopt-entrypoint: $1" >&2
  exit "${2:-1}"
}
[ -x "$bin" ] || die "gpuopt binary '$bin' not found or not executable (GPUOPT_BIN)"

if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  # A gpuopt subcommand (listed under "Subcommands:" in gpuopt --help), or another program.
  if "$bin" --help 2>/dev/null | sed '1,/^Subcommands:/d' | awk '{print $1}' | grep -qxF -- "$1"; then
    exec "$bin" "$@"
  fi
  exec "$@"
fi

repo=${GPUOPT_MODEL_REPOSITORY:-/models}
[ -d "$repo" ] || die "model repository '$repo' (GPUOPT_MODEL_REPOSITORY) is not a directory: mount one, e.g. docker run -v \$PWD/repo:/models:ro" 2
if [ -z "$(ls -A "$repo")" ]; then
  die "model repository '$repo' (GPUOPT_MODEL_REPOSITORY) is empty: expected <model>/<version>/model.onnx (docs/server.md)" 2
fi
for v in GPUOPT_HTTP_PORT GPUOPT_GRPC_PORT GPUOPT_METRICS_PORT GPUOPT_EXIT_TIMEOUT_SECS; do
  eval "val=\${$v:-}"
  case "$val" in
    '' | *[!0-9]*) [ -z "$val" ] || die "$v='$val': expected a non-negative integer" 2 ;;
  esac
done

set -- serve --model-repository "$repo" \
  --http-address "${GPUOPT_HTTP_ADDRESS:-0.0.0.0}" \
  --http-port "${GPUOPT_HTTP_PORT:-8000}" \
  --metrics-port "${GPUOPT_METRICS_PORT:-8002}" \
  --exit-timeout-secs "${GPUOPT_EXIT_TIMEOUT_SECS:-25}" "$@"
# The gRPC endpoint, where this build has one (guarded: older builds lack the flag).
if "$bin" serve --help 2>/dev/null | grep -q -- '--grpc-port'; then
  set -- "$@" --grpc-port "${GPUOPT_GRPC_PORT:-8001}"
fi
exec "$bin" "$@"
