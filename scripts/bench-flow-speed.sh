#!/usr/bin/env bash
# Reproduces docs/BENCHMARKS.md "Dataflow plans", speed: each plan's env
# steps/s against the hand-wired executor it replaces, seed 1, STEPS steps,
# through `herd bench learn --seeds 1 --steps STEPS --config C [--set ...]`,
# the runs of a round alternating, ROUNDS rounds, with the load average
# before each run.
#
#   scripts/bench-flow-speed.sh            (ROUNDS=3 STEPS=200000 LOAD=0 ONLY=ppo|dqn|all)
#
# Ends with the median of each ratio over the rounds.
#
# PPO: flow (GatherSync), flow with runtime.num_async=2 (the next round
# collected while the learner learns: one version of lag, as the dist
# executor's inline env workers have) and dist inline, in-process and over
# NATS. DQN: flow Ape-X against pal and dist DQN as configured (1-step,
# uniform replay, no double Q) and against pal and dist running Ape-X's
# algorithm (APEX below, 4 actors): the same updates, so the ratio is the
# executor's alone. LOAD=N adds N busy loops (bench learn --load).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-200000}
LOAD=${LOAD:-0}
ONLY=${ONLY:-all}
HERD=${HERD:-$(mktemp -d)/herd}
[ -x "$HERD" ] || go build -o "$HERD" ./cmd/herd
APEX="--set double_q=true --set n_steps=3 --set prioritized=true --set anneal_lr=true --set initial_priorities=actor --set apex_epsilon=0.4"

# run NAME CONFIG [ARGS...]: one bench learn run; prints NAME, sps, load.
run() {
  local name=$1 cfg=$2
  shift 2
  local load sps
  load=$(cut -d' ' -f1 /proc/loadavg)
  sps=$("$HERD" bench learn --seeds 1 --steps "$STEPS" --load "$LOAD" --json --config "configs/$cfg.yaml" "$@" 2>/dev/null |
    sed -n 's/.*"sps":\([0-9.]*\).*/\1/p' | tail -1)
  printf '%-28s %8.0f steps/s  load %s\n' "$name" "${sps:-0}" "$load"
  eval "SPS_${name//[^a-zA-Z0-9]/_}=${sps:-0}"
}
RATIOS=$(mktemp)
trap 'rm -f "$RATIOS"' EXIT
# ratio NAME A B: prints A/B and keeps it for the medians at the end.
ratio() { awk -v a="$2" -v b="$3" -v n="$1" 'BEGIN { printf "  %-34s %.2f\n", n, (b > 0 ? a / b : 0) }' | tee -a "$RATIOS"; }

for i in $(seq "$ROUNDS"); do
  echo "round $i $(date -u +%H:%M:%S) UTC"
  if [ "$ONLY" != dqn ]; then
    for tr in inproc nats; do
      run "ppo-dist-$tr" ppo-cartpole-dist --set runtime.transport=$tr
      run "ppo-flow-$tr" ppo-cartpole-flow --set runtime.transport=$tr
      run "ppo-flow2-$tr" ppo-cartpole-flow --set runtime.transport=$tr --set runtime.num_async=2
      eval 'ratio "flow/dist PPO '$tr'" $SPS_ppo_flow_'$tr' $SPS_ppo_dist_'$tr
      eval 'ratio "flow num_async 2/dist PPO '$tr'" $SPS_ppo_flow2_'$tr' $SPS_ppo_dist_'$tr
    done
  fi
  if [ "$ONLY" != ppo ]; then
    run pal dqn-cartpole-pal
    run pal-apex dqn-cartpole-pal $APEX --set runtime.actors=4
    for tr in inproc nats; do
      run "apex-flow-$tr" apex-cartpole-flow --set runtime.transport=$tr
      run "dist-$tr" dqn-cartpole-dist --set runtime.transport=$tr
      run "dist-apex-$tr" dqn-cartpole-dist --set runtime.transport=$tr $APEX --set runtime.env_workers=4
    done
    ratio "Ape-X flow/pal DQN" "$SPS_apex_flow_inproc" "$SPS_pal"
    ratio "Ape-X flow/pal Ape-X" "$SPS_apex_flow_inproc" "$SPS_pal_apex"
    for tr in inproc nats; do
      eval 'ratio "Ape-X flow/dist DQN '$tr'" $SPS_apex_flow_'$tr' $SPS_dist_'$tr
      eval 'ratio "Ape-X flow/dist Ape-X '$tr'" $SPS_apex_flow_'$tr' $SPS_dist_apex_'$tr
    done
  fi
done

# The median of each ratio over the rounds (single runs swing by ±10%).
echo "medians over $ROUNDS rounds:"
sed 's/^ *//; s/ *[0-9.]*$//' "$RATIOS" | sort -u | while read -r name; do
  vals=$(grep -F "  $name " "$RATIOS" | awk '{ print $NF }' | sort -n)
  awk -v n="$name" -v all="$(echo $vals)" '{ a[NR] = $1 } END {
    m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "  %-34s %.2f  (%s)\n", n, m, all }' <<<"$vals"
done
