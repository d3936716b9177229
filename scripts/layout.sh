#!/usr/bin/env bash
# The figures of docs/BENCHMARKS.md's "Code layout" section: cmd/herd's
# lines of non-test Go, the layering test (internal/lint), and the pairs of
# repeated places `duplicates` finds over the whole tree (when installed).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
files=$(ls cmd/herd/*.go | grep -v '_test\.go$')
echo "cmd/herd: $(cat $files | wc -l) lines of non-test Go in $(echo "$files" | wc -l) files (all: $(cat cmd/herd/*.go | wc -l))"
go test -count=1 ./internal/lint -run 'TestLayers|TestLayerViolations|TestCmdHerdThin' -v |
  grep -E '^(--- |ok|FAIL)|layer [0-9]|cmd/herd:|imports'
if command -v duplicates >/dev/null; then
  duplicates --most 1 --seconds 120 | head -1
else
  echo "duplicates: not installed here"
fi
