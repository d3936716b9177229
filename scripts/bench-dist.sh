#!/usr/bin/env bash
# Throughput of the distributed topology as processes (docs/BENCHMARKS.md
# "Distributed runs"): for N = 1…NMAX env-worker processes (4 CartPoles
# each) + 1 policy worker + the learner over an embedded NATS server (`herd
# launch`, PPO from configs/ppo-cartpole-dist-policy.yaml), print env steps/s; then the
# same with LOAD busy-loop processes (`herd bench spin`, those of
# `herd bench learn --load`) spinning beside them.
#
#   scripts/bench-dist.sh [NMAX] [STEPS]     (defaults 8, 200000; LOAD default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
NMAX=${1:-8}
STEPS=${2:-200000}
LOAD=${LOAD:-2}
T=$(mktemp -d)
LOOPS=()
cleanup() {
  local q
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # through the EXIT trap
go build -o "$T/herd" ./cmd/herd
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uptime | sed 's/.*load/load/')"
echo "| busy loops | env-worker processes N | env steps/s |"
echo "|---|---|---|"
for load in 0 "$LOAD"; do
  for ((q = 0; q < load; q++)); do
    "$T/herd" bench spin 2>/dev/null & LOOPS+=($!)
  done
  [ "$load" -gt 0 ] && sleep 0.5
  for ((n = 1; n <= NMAX; n++)); do
    sed "s/env_workers: 2/env_workers: $n/; s/^steps: .*/steps: $STEPS/" \
      configs/ppo-cartpole-dist-policy.yaml >"$T/c.yaml"
    line=$("$T/herd" launch --config "$T/c.yaml" --quiet --out "$T/run-$load-$n" | grep '^done:')
    rate=$(sed -n 's/.*(\([0-9.]*\) steps\/s).*/\1/p' <<<"$line")
    [ -n "$rate" ] || { echo "no rate in: $line" >&2; exit 1; }
    echo "| $load | $n | $rate |"
  done
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  LOOPS=()
done
