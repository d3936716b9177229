#!/usr/bin/env bash
# Old against new herd on the runs whose speed a change to the env loops or
# the executors must keep (docs/BENCHMARKS.md "The env-step loops"): the
# two binaries alternate run by run, ROUNDS rounds quiet, then ROUNDS beside
# two busy loops; one Markdown row per run with each binary's wall and CPU
# seconds (user+sys) and the medians' ratio new / old.
#
#   scripts/old-new.sh OLD_REV NEW_REV     # commits (built here), or
#   OLD_BIN=… NEW_BIN=… scripts/old-new.sh  # two herd binaries
#
# ROUNDS (default 3); RUNS (default all): names from the list below;
# SKIP_BUSY=1 skips the busy rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d)
BUSY=()
cleanup() { for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
build() { # REV OUT
  git worktree add -q --detach "$T/src-$2" "$1"
  (cd "$T/src-$2" && go build -o "$T/$2" ./cmd/herd)
  git worktree remove --force "$T/src-$2"
}
if [ -n "${OLD_BIN:-}" ]; then cp "$OLD_BIN" "$T/old"; cp "$NEW_BIN" "$T/new"; else build "$1" old; build "$2" new; fi
ROUNDS=${ROUNDS:-3}
declare -A CMD=(
  [local-ppo]="train --algo ppo --env CartPole-v1 --steps 500000"
  [local-dqn]="train --algo dqn --env CartPole-v1 --steps 500000"
  [hts-ppo]="train --config configs/ppo-cartpole-hts.yaml"
  [flow-ppo]="train --config configs/ppo-cartpole-flow.yaml"
  [launch-ppo]="launch --config configs/ppo-cartpole-dist.yaml"
  [launch-ppo-policy]="launch --config configs/ppo-cartpole-dist-policy.yaml"
  [launch-dqn]="launch --config configs/dqn-cartpole-dist.yaml"
)
RUNS=${RUNS:-local-ppo local-dqn hts-ppo flow-ppo launch-ppo launch-ppo-policy launch-dqn}
# one BIN RUN: appends "wall cpu" to $T/BIN.RUN.MODE
one() {
  local o="$T/out" t
  rm -rf "$o"
  # shellcheck disable=SC2086
  /usr/bin/time -o "$T/time" -f '%e %U %S' "$T/$1" ${CMD[$2]} --quiet --out "$o" >/dev/null 2>"$T/err" ||
    { echo "$1 $2 failed: $(tail -1 "$T/err")" >&2; return 1; }
  t=$(tail -1 "$T/time")
  echo "$t" | awk '{printf "%.2f %.2f\n", $1, $2 + $3}' >>"$T/$1.$2.$MODE"
}
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
col() { awk -v c="$1" '{print $c}' "$2" | paste -sd, - | sed 's/,/, /g'; }
modes=quiet; [ -n "${SKIP_BUSY:-}" ] || modes="quiet busy"
for MODE in $modes; do
  if [ "$MODE" = busy ]; then for _ in 1 2; do (while :; do :; done) & BUSY+=($!); done; fi
  for r in $(seq 1 "$ROUNDS"); do
    for run in $RUNS; do one old "$run"; one new "$run"; done
    echo "round $r $MODE done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done; BUSY=()
done
echo "| run | mode | old wall s | new wall s | old CPU s | new CPU s | new/old median wall, CPU |"
echo "|---|---|---|---|---|---|---|"
for run in $RUNS; do for MODE in $modes; do
  o="$T/old.$run.$MODE" n="$T/new.$run.$MODE"
  rw=$(echo "$(col 1 "$n" | tr ',' '\n' | med) $(col 1 "$o" | tr ',' '\n' | med)" | awk '{printf "%.2f", $1 / $2}')
  rc=$(echo "$(col 2 "$n" | tr ',' '\n' | med) $(col 2 "$o" | tr ',' '\n' | med)" | awk '{printf "%.2f", $1 / $2}')
  echo "| $run | $MODE | $(col 1 "$o") | $(col 1 "$n") | $(col 2 "$o") | $(col 2 "$n") | $rw, $rc |"
done; done
