#!/bin/bash
# Data-parallel learners split over two simulated hosts: network namespaces
# herd-a and herd-b joined by a veth pair (10.77.0.1 ↔ 10.77.0.2), created
# and removed by this script. Host A runs a nats-server, the controller
# (herd launch --no-workers), learner 0, policy worker 0 and env worker 0;
# host B runs env worker 1 and, with LEARNERS=2, learner 1, whose traffic
# (gradients, samples, weights, inference) all crosses the link to A.
#
# The link's one-way delay D (a round trip is 2 × D) comes from `tc netem`
# on both veth ends where the kernel has the netem qdisc (sch_netem). Where
# it does not (tc: "Specified qdisc kind is unknown") and TOXIPROXY names a
# toxiproxy-server binary, host B instead reaches NATS through toxiproxy
# running in B (127.0.0.1:4222 in B → 10.77.0.1:4222 over the veth) with a
# latency toxic of D on each direction: a userspace stand-in for netem that
# delays every byte of B's streams by D each way, as netem delays packets.
# It costs CPU on this machine (printed) and keeps TCP's own behaviour
# (windows, ACK timing) on the undelayed veth, so it is close to, not equal
# to, a delayed link. MODE=proxy forces it; MODE=netem refuses the fallback.
# Needs root, ip and tc (iproute2) and curl (toxiproxy's API).
#
#   NATS_SERVER=/path/to/nats-server [TOXIPROXY=/path/to/toxiproxy-server] \
#     scripts/learners-netem.sh HERD [DELAY…]
#
# HERD is a herd binary (go build -o /tmp/herd ./cmd/herd); NATS_SERVER a
# nats-server (go build -o /tmp/nats-server github.com/nats-io/nats-server/v2);
# TOXIPROXY a toxiproxy-server (GOBIN=/tmp go install
# github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0; the binary is named
# server). DELAY is a one-way delay in ms (0, 1ms, 10ms); default
# "1ms 10ms". STEPS (default 500000), SEED (1), LEARNERS (default 2:
# learner i on host A for even i, B for odd) and CONFIG may be set; there
# are always 2 env workers, one per host. Prints one line per delay: the
# measured NATS round trip from B, return, steps/s, policy lag, CPU seconds
# of every process.
set -u
HERD=${1:?usage: NATS_SERVER=… $0 HERD [DELAY…]}
shift
DELAYS=${*:-1ms 10ms}
NATS=${NATS_SERVER:?set NATS_SERVER to a nats-server binary}
STEPS=${STEPS:-500000}
SEED=${SEED:-1}
LEARNERS=${LEARNERS:-2}
MODE=${MODE:-auto}
CONFIG=${CONFIG:-$(dirname "$0")/../configs/ppo-cartpole-dist.yaml}
OUT=$(mktemp -d /tmp/learners-netem.XXXXXX)
A=herd-a B=herd-b

[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 2; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "$0: needs ip and tc (iproute2)" >&2; exit 2; }

pids=()
teardown() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pids=()
  ip netns del $A 2>/dev/null
  ip netns del $B 2>/dev/null
}
trap 'teardown; rm -rf "$OUT"' EXIT

# delay_ms D → D as whole milliseconds (toxiproxy takes integers).
delay_ms() {
  case $1 in
    0) echo 0 ;;
    *ms) echo "${1%ms}" ;;
    *) echo "$0: delay $1: give it in ms (1ms, 10ms)" >&2; return 1 ;;
  esac
}

setup() { # delay → sets B_URL, the NATS URL host B's processes use
  ip netns add $A && ip netns add $B || return 1
  ip link add veth-a type veth peer name veth-b || return 1
  ip link set veth-a netns $A && ip link set veth-b netns $B || return 1
  ip -n $A addr add 10.77.0.1/24 dev veth-a && ip -n $B addr add 10.77.0.2/24 dev veth-b || return 1
  for ns in $A $B; do ip -n $ns link set lo up || return 1; done
  ip -n $A link set veth-a up && ip -n $B link set veth-b up || return 1
  B_URL=nats://10.77.0.1:4222 DELAY_BY=none
  [ "$1" = 0 ] && [ "$MODE" != proxy ] && return 0
  if [ "$MODE" != proxy ]; then
    if ip netns exec $A tc qdisc add dev veth-a root netem delay "$1" 2>"$OUT/tc.err"; then
      ip netns exec $B tc qdisc add dev veth-b root netem delay "$1" || return 1
      DELAY_BY=netem
      return 0
    fi
    if [ "$MODE" = netem ] || [ -z "${TOXIPROXY:-}" ]; then
      echo "$0: tc netem refused: $(cat "$OUT/tc.err") (this kernel lacks the netem qdisc, sch_netem; set TOXIPROXY for the userspace stand-in)" >&2
      return 1
    fi
  fi
  local ms
  ms=$(delay_ms "$1") || return 1
  command -v curl >/dev/null || { echo "$0: needs curl for toxiproxy's API" >&2; return 1; }
  ip netns exec $B "$TOXIPROXY" -host 127.0.0.1 -port 8474 >"$OUT/toxiproxy-$1.log" 2>&1 &
  pids+=($!)
  TOXI_PID=$!
  local api=http://127.0.0.1:8474 i
  for i in $(seq 50); do ip netns exec $B curl -sf $api/version >/dev/null && break; sleep 0.1; done
  ip netns exec $B curl -sf -X POST $api/proxies \
    -d '{"name":"nats","listen":"127.0.0.1:4222","upstream":"10.77.0.1:4222"}' >/dev/null || return 1
  for dir in upstream downstream; do
    ip netns exec $B curl -sf -X POST $api/proxies/nats/toxics \
      -d "{\"name\":\"delay-$dir\",\"type\":\"latency\",\"stream\":\"$dir\",\"attributes\":{\"latency\":$ms,\"jitter\":0}}" >/dev/null || return 1
  done
  B_URL=nats://127.0.0.1:4222 DELAY_BY=toxiproxy
}

cpu_s() { # pid → user+system CPU seconds of the process and its waited-for children
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15 + $16 + $17) / hz }' "/proc/$1/stat" 2>/dev/null || echo -
}

host() { [ $(($1 % 2)) = 0 ] && echo $A || echo $B; }
url() { [ "$(host "$1")" = $A ] && echo nats://10.77.0.1:4222 || echo "$B_URL"; }

# rtt_ms URL → median of 20 NATS PING→PONG round trips from host B, in ms:
# shows the delay the link really adds (2 × D expected).
rtt_ms() {
  ip netns exec $B python3 - "$1" <<'PY' 2>/dev/null || echo -
import socket, statistics, sys, time
host, port = sys.argv[1].removeprefix("nats://").rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
f = s.makefile("rb")
f.readline()  # INFO
s.sendall(b'CONNECT {"verbose":false}\r\n')
rtts = []
for _ in range(20):
    t = time.perf_counter()
    s.sendall(b"PING\r\n")
    line = f.readline()
    if not line.startswith(b"PONG"):
        sys.exit(1)
    rtts.append((time.perf_counter() - t) * 1000)
print("%.2f" % statistics.median(rtts))
PY
}

for d in $DELAYS; do
  setup "$d" || exit 1
  ip netns exec $A "$NATS" -a 10.77.0.1 -p 4222 -js -sd "$OUT/js-$d" >"$OUT/nats-$d.log" 2>&1 &
  pids+=($!)
  NATS_PID=$!
  sleep 1
  rtt=$(rtt_ms "$B_URL")
  run=netem-${d}-m$LEARNERS
  start=$(date -u +%T)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  HERD_NATS_URL=nats://10.77.0.1:4222 ip netns exec $A "$HERD" launch --config "$CONFIG" --steps "$STEPS" --seed "$SEED" \
    --set runtime.learners="$LEARNERS" --set runtime.env_workers=2 \
    --out "$OUT/$run" --run "$run" --quiet --no-workers >"$OUT/$run.log" 2>&1 &
  lp=$!
  sleep 1
  wpids=()
  start_worker() { # role slot extra…
    local role=$1 slot=$2
    shift 2
    HERD_NATS_URL=$(url "$slot") ip netns exec "$(host "$slot")" "$HERD" worker --run "$run" --role "$role" --slot "$slot" "$@" \
      >"$OUT/$run.$role$slot.log" 2>&1 &
    pids+=($!) wpids+=($!)
  }
  for i in $(seq 0 $((LEARNERS - 1))); do
    if [ "$i" = 0 ]; then start_worker learner 0 --out "$OUT/$run" --quiet; else start_worker learner "$i"; fi
  done
  start_worker env 0
  start_worker env 1
  start_worker policy 0
  # Sample each process's CPU just before it exits: poll until the controller ends.
  declare -A cpu=()
  while kill -0 "$lp" 2>/dev/null; do
    for p in "$lp" "${wpids[@]}" "$NATS_PID" ${TOXI_PID:+"$TOXI_PID"}; do
      c=$(cpu_s "$p"); [ "$c" != - ] && [ -n "$c" ] && cpu[$p]=$c
    done
    sleep 0.5
  done
  wait "$lp"
  rc=$?
  sum="$OUT/$run/summary.json"
  if [ -f "$sum" ]; then
    ret=$(grep -o '"final_return_mean_100": [0-9.]*' "$sum" | cut -d' ' -f2)
    sps=$(grep -o '"sps": [0-9.]*' "$sum" | cut -d' ' -f2)
  else
    ret=- sps=-
  fi
  total=0 detail=""
  for p in "${!cpu[@]}"; do total=$(awk -v a="$total" -v b="${cpu[$p]}" 'BEGIN { printf "%.1f", a + b }'); done
  [ -n "${TOXI_PID:-}" ] && detail=", toxiproxy ${cpu[$TOXI_PID]:-?} s"
  lag=$(grep -o '"dist/lag_mean": [0-9.]*' "$sum" 2>/dev/null | cut -d' ' -f2)
  echo "delay $d one-way ($DELAY_BY, B→A NATS round trip ${rtt} ms), M=$LEARNERS, seed $SEED: controller exit $rc, return (last 100) $ret, env steps/s ${sps%.*}, lag mean ${lag:--}, CPU ${total} s$detail, start $start UTC, load $load"
  [ "$rc" = 0 ] || tail -3 "$OUT/$run.log" "$OUT/$run".learner*.log >&2
  teardown
  unset TOXI_PID
done
