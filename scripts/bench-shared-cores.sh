#!/usr/bin/env bash
# Reproduces the tables of docs/BENCHMARKS.md "Shared cores".
#
#   scripts/bench-shared-cores.sh [BASE_COMMIT]     (default c7b923d, the code before the shared-core waits)
#
# Part 1, shared cores: with two busy-loop processes on the machine, `herd train`
# of DQN and PPO (CartPole, 100k steps) and SAC (Pendulum, 20k) on all cores vs
# pinned to CPU 0 (as `taskset -c 0`), for the current code (through
# `herd bench learn --load 2 --pin all --pin 0`) and for BASE (shell busy loops
# and taskset: the old binary has no --load). Goal: all/pinned ≤ 1.25.
#
# Part 2, quiet machine: DQN and PPO CartPole 500k, BASE and current binaries
# alternating in one run, REPS times each. Goal: new/old ≤ 1.10. Run it with
# nothing else on the machine; the script prints the load average it saw.
#
# Environment: REPS (default 3), SKIP_QUIET=1 or SKIP_LOAD=1 to run one part.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-c7b923d}
REPS=${REPS:-3}
T=$(mktemp -d)
LOOPS=()
cleanup() {
  local q
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  git worktree remove --force "$T/base" >/dev/null 2>&1 || true
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # through the EXIT trap

echo "== building current ($(git rev-parse --short HEAD)) and base ($BASE)"
go build -o "$T/herd-new" ./cmd/herd
git worktree add --detach "$T/base" "$BASE" >/dev/null 2>&1
(cd "$T/base" && go build -o "$T/herd-old" ./cmd/herd)
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(uptime)"; nproc

# wall BIN PIN CONFIG STEPS: one `herd train`, prints its wall seconds
# (summary.json); PIN is a CPU list for taskset, or all.
wall() {
  local bin=$1 pin=$2 cfg=$3 steps=$4 out="$T/run"
  rm -rf "$out"
  if [ "$pin" = all ]; then
    "$bin" train --config "$cfg" --steps "$steps" --quiet --out "$out" >/dev/null
  else
    taskset -c "$pin" "$bin" train --config "$cfg" --steps "$steps" --quiet --out "$out" >/dev/null
  fi
  jq -r .wall_seconds "$out/summary.json"
}

busy() { # start N shell busy loops (not pinned)
  for _ in $(seq "$1"); do sh -c 'while :; do :; done' & LOOPS+=($!); done
  sleep 0.2
}
unbusy() {
  local q
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  for q in "${LOOPS[@]}"; do wait "$q" 2>/dev/null || true; done
  LOOPS=()
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

if [ "${SKIP_LOAD:-}" != 1 ]; then
  echo
  echo "== part 1: two busy loops, all cores vs pinned to CPU 0 ($REPS runs each, alternating)"
  for spec in "configs/dqn-cartpole.yaml 100000" "configs/ppo-cartpole.yaml 100000" "configs/sac-pendulum.yaml 20000"; do
    set -- $spec
    echo "-- current: herd bench learn --config $1 --steps $2 --seeds $(seq -s, "$REPS" | sed 's/[0-9]\+/1/g') --load 2 --pin all --pin 0"
    "$T/herd-new" bench learn --config "$1" --steps "$2" --seeds "$(seq -s, "$REPS" | sed 's/[0-9]\+/1/g')" \
      --load 2 --pin all --pin 0 2>&1 | grep -v ' seed 1: return'
    echo "-- base ($BASE), shell busy loops, taskset -c 0 for pinned:"
    a=(); p=()
    for _ in $(seq "$REPS"); do
      busy 2; a+=("$(wall "$T/herd-old" all "$1" "$2")"); unbusy
      busy 2; p+=("$(wall "$T/herd-old" 0 "$1" "$2")"); unbusy
    done
    ma=$(printf '%s\n' "${a[@]}" | median); mp=$(printf '%s\n' "${p[@]}" | median)
    echo "   all cores: ${a[*]} s; pinned: ${p[*]} s; medians $ma / $mp = $(awk -v x="$ma" -v y="$mp" 'BEGIN{printf "%.2f", x/y}')x"
  done
  echo "load after part 1: $(uptime)"
fi

if [ "${SKIP_QUIET:-}" != 1 ]; then
  echo
  echo "== part 2: quiet machine, CartPole 500k, base vs current alternating ($REPS runs each)"
  for cfg in configs/dqn-cartpole.yaml configs/ppo-cartpole.yaml; do
    o=(); n=()
    for _ in $(seq "$REPS"); do
      o+=("$(wall "$T/herd-old" all "$cfg" 500000)")
      n+=("$(wall "$T/herd-new" all "$cfg" 500000)")
    done
    mo=$(printf '%s\n' "${o[@]}" | median); mn=$(printf '%s\n' "${n[@]}" | median)
    echo "$cfg: base ${o[*]} s; current ${n[*]} s; medians $mo / $mn; current/base = $(awk -v x="$mn" -v y="$mo" 'BEGIN{printf "%.2f", x/y}')x"
  done
  echo "load after part 2: $(uptime)"
fi
