#!/usr/bin/env bash
# Builds the two images deploy/compose/compose.yaml runs, locally and FROM
# scratch, so a machine without an image registry can run them:
#
#   herd:local       the static herd binary (CGO_ENABLED=0) and configs/
#   herd-nats:local  nats-server built from the Go module pinned in go.mod
#
#   deploy/compose/build.sh
#   HERD_BIN=/path/herd NATS_BIN=/path/nats-server deploy/compose/build.sh  # reuse static binaries
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cd "$root"
if [ -n "${HERD_BIN:-}" ]; then cp "$HERD_BIN" "$ctx/herd"; else
  CGO_ENABLED=0 go build -trimpath -o "$ctx/herd" ./cmd/herd
fi
if [ -n "${NATS_BIN:-}" ]; then cp "$NATS_BIN" "$ctx/nats-server"; else
  CGO_ENABLED=0 go build -trimpath -o "$ctx/nats-server" github.com/nats-io/nats-server/v2
fi
cp -r configs "$ctx/configs"
cp deploy/compose/Dockerfile.herd deploy/compose/Dockerfile.nats "$ctx/"
build() { # quiet unless it fails (the legacy builder warns on every build)
  local out
  out=$(docker build -q "$@" 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
}
build -f "$ctx/Dockerfile.herd" -t herd:local "$ctx"
build -f "$ctx/Dockerfile.nats" -t herd-nats:local "$ctx"
echo "built herd:local and herd-nats:local"
