#!/usr/bin/env bash
# Generates the Python gRPC stubs of the voxgate bridge API (proto/grpc/voxgate.proto) into
# build/pygrpc/ (voxgate_pb2.py, voxgate_pb2_grpc.py), with grpcio-tools from the .venv that
# scripts/setup creates. Idempotent: regenerates only when the .proto, this script or the venv's
# requirements (the stubs check the grpcio/protobuf runtime versions) are newer than the stubs.
# Works from any cwd. Usage: scripts/gen_grpc_stubs.sh [--force]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PROTO=proto/grpc/voxgate.proto
OUT=build/pygrpc
PY=.venv/bin/python
STUBS=("$OUT/voxgate_pb2.py" "$OUT/voxgate_pb2_grpc.py")
INPUTS=("$PROTO" "${BASH_SOURCE[0]}")
[[ -f .venv/.voxgate-requirements ]] && INPUTS+=(.venv/.voxgate-requirements)

if [[ ${1:-} != --force ]]; then
  fresh=1
  for f in "${STUBS[@]}"; do
    [[ -f $f ]] || fresh=0
    for src in "${INPUTS[@]}"; do
      if [[ $src -nt $f ]]; then fresh=0; fi
    done
  done
  ((fresh)) && exit 0
fi

if [[ ! -x $PY ]]; then
  echo "gen_grpc_stubs: $PY missing (run scripts/setup first)" >&2
  exit 1
fi
mkdir -p "$OUT"
# Generate into a temporary directory and move into place, so an interrupted run never leaves
# a half-written pair behind (and a reader never sees one).
tmp=$(mktemp -d "$OUT/.gen.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PY" -m grpc_tools.protoc -I proto/grpc --python_out="$tmp" --grpc_python_out="$tmp" "$PROTO"
for f in "${STUBS[@]}"; do
  mv -f "$tmp/$(basename "$f")" "$f"
done
