#!/bin/bash
# Two data-parallel learners split over two simulated hosts: network
# namespaces herd-a and herd-b joined by a veth pair (10.77.0.1 ↔
# 10.77.0.2), each end delayed by `tc netem` (one-way DELAY, so a round trip
# is 2 × DELAY), created and removed by this script. Host A runs a
# nats-server, the controller (herd launch --no-workers), learner 0, policy
# worker 0 and env worker 0; host B runs learner 1 and env worker 1, whose
# traffic (gradients, samples, inference) all crosses the delayed link.
# Needs root, ip, tc and a kernel with the netem qdisc (sch_netem).
#
#   NATS_SERVER=/path/to/nats-server scripts/learners-netem.sh HERD [DELAY…]
#
# HERD is a herd binary (go build -o /tmp/herd ./cmd/herd); NATS_SERVER a
# nats-server (go build -o /tmp/nats-server github.com/nats-io/nats-server/v2);
# DELAY is a netem delay (1ms, 10ms; 0: no qdisc); default "1ms 10ms".
# STEPS (default 500000) and LEARNERS (default 2: learner i on host A for
# even i, B for odd) may be set. Prints one line per delay: return, steps/s.
set -u
HERD=${1:?usage: NATS_SERVER=… $0 HERD [DELAY…]}
shift
DELAYS=${*:-1ms 10ms}
NATS=${NATS_SERVER:?set NATS_SERVER to a nats-server binary}
STEPS=${STEPS:-500000}
LEARNERS=${LEARNERS:-2}
CONFIG=${CONFIG:-$(dirname "$0")/../configs/ppo-cartpole-dist.yaml}
OUT=$(mktemp -d /tmp/learners-netem.XXXXXX)
A=herd-a B=herd-b

[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "$0: needs ip and tc (iproute2)" >&2; exit 2; }

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del $A 2>/dev/null
  ip netns del $B 2>/dev/null
  rm -rf "$OUT"
}
trap cleanup EXIT

setup() { # delay
  ip netns add $A && ip netns add $B || return 1
  ip link add veth-a type veth peer name veth-b || return 1
  ip link set veth-a netns $A && ip link set veth-b netns $B || return 1
  ip -n $A addr add 10.77.0.1/24 dev veth-a && ip -n $B addr add 10.77.0.2/24 dev veth-b || return 1
  for ns in $A $B; do ip -n $ns link set lo up || return 1; done
  ip -n $A link set veth-a up && ip -n $B link set veth-b up || return 1
  if [ "$1" != 0 ]; then
    if ! ip netns exec $A tc qdisc add dev veth-a root netem delay "$1" 2>"$OUT/tc.err"; then
      echo "$0: tc netem refused: $(cat "$OUT/tc.err") (this kernel lacks the netem qdisc, sch_netem)" >&2
      return 1
    fi
    ip netns exec $B tc qdisc add dev veth-b root netem delay "$1" || return 1
  fi
}

teardown() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
  ip netns del $A 2>/dev/null
  ip netns del $B 2>/dev/null
}

for d in $DELAYS; do
  setup "$d" || exit 1
  ip netns exec $A "$NATS" -a 10.77.0.1 -p 4222 -js -sd "$OUT/js-$d" >"$OUT/nats-$d.log" 2>&1 &
  pids+=($!)
  sleep 1
  export HERD_NATS_URL=nats://10.77.0.1:4222
  run=netem-${d}
  start=$(date -u +%T)
  load=$(cut -d' ' -f1 /proc/loadavg)
  ip netns exec $A "$HERD" launch --config "$CONFIG" --steps "$STEPS" --set runtime.learners="$LEARNERS" --set runtime.env_workers="$LEARNERS" \
    --out "$OUT/$run" --run "$run" --quiet --no-workers >"$OUT/$run.log" 2>&1 &
  lp=$!
  sleep 1
  host() { [ $(($1 % 2)) = 0 ] && echo $A || echo $B; }
  for i in $(seq 0 $((LEARNERS - 1))); do
    extra=()
    [ "$i" = 0 ] && extra=(--out "$OUT/$run" --quiet)
    ip netns exec "$(host "$i")" "$HERD" worker --run "$run" --role learner --slot "$i" "${extra[@]}" >"$OUT/$run.learner$i.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 0 $((LEARNERS - 1))); do # env_workers = learners: env worker i feeds learner i
    ip netns exec "$(host "$i")" "$HERD" worker --run "$run" --role env --slot "$i" >"$OUT/$run.env$i.log" 2>&1 &
    pids+=($!)
  done
  ip netns exec $A "$HERD" worker --run "$run" --role policy --slot 0 >"$OUT/$run.policy0.log" 2>&1 &
  pids+=($!)
  wait "$lp"
  rc=$?
  sum="$OUT/$run/summary.json"
  if [ -f "$sum" ]; then
    ret=$(grep -o '"final_return_mean_100": [0-9.]*' "$sum" | cut -d' ' -f2)
    sps=$(grep -o '"sps": [0-9.]*' "$sum" | cut -d' ' -f2)
  else
    ret=- sps=-
  fi
  echo "delay $d one-way (RTT 2×), $LEARNERS learners split over 2 namespaces: controller exit $rc, return (last 100) $ret, env steps/s ${sps%.*}, start $start UTC, load $load"
  [ "$rc" = 0 ] || { tail -3 "$OUT/$run.log" "$OUT/$run.learner0.log" "$OUT/$run.learner1.log" >&2; }
  teardown
done
