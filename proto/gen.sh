#!/usr/bin/env bash
# Regenerates the Go and Python code for proto/herd/v1/*.proto with pinned
# tools. CI runs it and fails if the committed code differs.
#
# Needs: protoc (Debian's protobuf-compiler) and grpc_tools (Debian's
# python3-grpc-tools, run with Debian's /usr/bin/python3); the two Go
# plugins are installed at the pinned versions below into .cache/protoc-bin.
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PY=${HERD_PYTHON:-/usr/bin/python3}

bin="$PWD/.cache/protoc-bin"
mkdir -p "$bin"
GOBIN="$bin" go install "$PROTOC_GEN_GO"
GOBIN="$bin" go install "$PROTOC_GEN_GO_GRPC"

# Go: every .proto in proto/herd/v1 (env, replay, dist). Python: only the
# protocols a Python peer speaks (env, replay).
protos=(proto/herd/v1/*.proto)
py_protos=(proto/herd/v1/env.proto proto/herd/v1/replay.proto)

# Go: messages and services into proto/herd/v1 (package herdv1).
PATH="$bin:$PATH" protoc -I proto \
  --go_out=. --go_opt=module=herd \
  --go-grpc_out=. --go-grpc_opt=module=herd \
  "${protos[@]}"

# Python: messages with Debian's protoc (its output matches Debian's
# python3-protobuf runtime), services with grpc_tools' plugin.
out=python/herd_env/_proto
mkdir -p "$out"
protoc -I proto --python_out="$out" "${py_protos[@]}"
"$PY" -m grpc_tools.protoc -I proto --grpc_python_out="$out" "${py_protos[@]}"
# grpc_tools writes absolute imports (from herd.v1 import env_pb2); make
# them relative to the package the files live in.
find "$out/herd/v1" -name '*_pb2*.py' -exec sed -i -E 's/^from herd\.v1 import/from . import/' {} +
touch "$out/__init__.py" "$out/herd/__init__.py" "$out/herd/v1/__init__.py"
