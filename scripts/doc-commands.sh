#!/usr/bin/env bash
# Runs every herd command of README.md in order, as a new user would, in a
# fresh clone of the committed tree (the default output directories must
# not collide; nothing may fail). Long: each training command runs as
# written. TestDocCommands (cmd/herd) checks the same commands' flags,
# configs and --set keys in CI without running them.
#
#   scripts/doc-commands.sh [FILE.md]     (default README.md)
#
# Skipped: `go test` (CI runs it), the OpenBLAS lines (need apt-get) and
# synopsis lines. Output: one line per command with its exit status and
# wall seconds; the exit status is 1 if any command failed.
set -uo pipefail
cd "$(dirname "$0")/.."
DOC=${1:-README.md}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git clone -q . "$T/herd"
python3 - "$DOC" > "$T/cmds" <<'PY'
import sys
inblock=False
cont=""
for line in open(sys.argv[1]):
    line=line.rstrip("\n")
    if line.startswith("```sh"): inblock=True; continue
    if line.startswith("```"): inblock=False; continue
    if not inblock: continue
    if line.endswith("\\"): cont+=line[:-1]+" "; continue
    line=cont+line; cont=""
    cmd=line.split(" #")[0].strip()
    if "./cmd/herd" not in cmd or "-tags" in cmd: continue
    if any(c in cmd for c in "[|") or "FILE" in cmd or cmd.endswith("--help"): continue
    print(cmd)
PY
cd "$T/herd"
fail=0
while IFS= read -r c; do
  s=$SECONDS
  timeout 1800 bash -c "$c" > "$T/out" 2>&1 < /dev/null
  rc=$?
  printf 'rc=%d %4ds  %s\n' "$rc" $((SECONDS - s)) "$c"
  if [ $rc -ne 0 ]; then fail=1; tail -5 "$T/out" | sed 's/^/    /'; fi
done < "$T/cmds"
exit $fail
