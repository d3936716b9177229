#!/usr/bin/env bash
# Measures every PAL allocation (N actors, M learners) with N + M <= 4 on
# DQN CartPole (the config's 500k steps, seeds 1-3, alternating), the table that
# `herd tune`'s choice is checked against in docs/BENCHMARKS.md "PAL".
#
#   scripts/pal-sweep.sh [HERD_BINARY]     (default: go build into a temp dir)
#   STEPS=100000 scripts/pal-sweep.sh      (shorter runs, which vary more from
#                                           run to run: about ±10% on a 2-core VM)
#   SEEDS="1" scripts/pal-sweep.sh         (fewer seeds; default "1 2 3")
#
# Prints "N M seed env_steps_per_s" per run, then the mean per allocation.
set -euo pipefail
cd "$(dirname "$0")/.."
H=${1:-}
if [ -z "$H" ]; then
  T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
  go build -o "$T/herd" ./cmd/herd; H=$T/herd
fi
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(uptime)"
rows=()
for seed in ${SEEDS:-1 2 3}; do
  for nm in "1 1" "1 2" "1 3" "2 1" "2 2" "3 1"; do
    set -- $nm
    sps=$("$H" bench learn --config configs/dqn-cartpole-pal.yaml --steps "${STEPS:-500000}" --seeds "$seed" \
      --set runtime.actors="$1" --set runtime.learners="$2" 2>&1 |
      awk '$1 ~ /^configs/ && NF > 8 {print $8}' | tail -1)
    [ -n "$sps" ] || { echo "run N=$1 M=$2 seed $seed failed" >&2; exit 1; }
    echo "$1 $2 $seed $sps"; rows+=("$1 $2 $sps")
  done
done
echo "mean env steps/s per allocation:"
printf '%s\n' "${rows[@]}" | awk '{s[$1" "$2]+=$3; n[$1" "$2]++} END {for (k in s) printf "  (%s) %.0f\n", k, s[k]/n[k]}' | sort
echo "load after: $(uptime)"
