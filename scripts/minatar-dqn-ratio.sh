#!/usr/bin/env bash
# herd's DQN beside MinAtar's own examples/dqn.py (docs/BENCHMARKS.md
# "MinAtar"): the same game, config, frame budget and seeds, alternating
# seed by seed, one Markdown row per seed with each side's mean return over
# its last 100 episodes and its frames/s.
#
#   scripts/minatar-dqn-ratio.sh MINATAR_DIR [FRAMES] [SEEDS]
#
# MINATAR_DIR: a checkout of github.com/kenjyoung/MinAtar (run unchanged,
# as a black box, through scripts/minatar_dqn_ref.py; needs Debian's
# python3-torch). FRAMES (default 100000) shortens MinAtar's 5M-frame
# budget; herd's ε decay is set to MinAtar's 100k frames whatever FRAMES
# is (exploration_fraction = 100000 / FRAMES). SEEDS: default "1 2 3".
# THREADS (default 1) is torch's thread count; herd runs as configured.
set -euo pipefail
M=$(cd "$1" && pwd); FRAMES=${2:-100000}; SEEDS=${3:-1 2 3}; THREADS=${THREADS:-1}
cd "$(dirname "$0")/.."
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
go build -o "$T/herd" ./cmd/herd
PY=/usr/bin/python3
echo "| seed | herd return (last 100) | herd frames/s | MinAtar return (last 100) | MinAtar frames/s | load |"
echo "|---|---:|---:|---:|---:|---|"
for s in $SEEDS; do
  t0=$(date +%s.%N)
  "$T/herd" train --config configs/dqn-minatar-breakout.yaml --steps "$FRAMES" --seed "$s" \
    --set exploration_fraction="$($PY -c "print(100000/$FRAMES)")" --quiet --out "$T/herd-$s" >/dev/null
  hw=$(echo "$(date +%s.%N) - $t0" | bc)
  $PY scripts/minatar_dqn_ref.py --minatar "$M" --game breakout --frames "$FRAMES" --seed "$s" --threads "$THREADS" --out "$T/ref-$s.json" 2>/dev/null
  $PY - "$T/herd-$s/summary.json" "$T/ref-$s.json" "$hw" "$FRAMES" "$(cut -d' ' -f1-3 /proc/loadavg)" "$s" <<'PY'
import json, sys
h, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
hw, frames, load, seed = float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
last = r["returns"][-100:]
print(f"| {seed} | {h['final_return_mean_100']:.2f} | {frames / hw:.0f} | {sum(last) / len(last):.2f} | {r['frames_per_s']:.0f} | {load} |")
PY
done
