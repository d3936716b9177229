#!/usr/bin/env bash
# Fault matrix of `herd launch` on this machine: for each fault, starts a
# PPO CartPole run (embedded NATS, 2 env workers, 1 policy worker), injects
# the fault a few seconds in, and prints one row: the launcher's exit code,
# whether the run completed (summary.json status and steps), its dist
# counters (duplicates must be 0) and how long it took.
#
#   scripts/dist_faults.sh [HERD_BINARY] [STEPS]
#   MODE=noworkers NATS_SERVER=/path/to/nats-server scripts/dist_faults.sh …
#   ROWS="none partition-env-30s" scripts/dist_faults.sh …   (some rows only)
#   CONFIG=FILE scripts/dist_faults.sh …   (another run config, e.g. with runtime.learners: 2)
#
# MODE=noworkers runs the orchestrated layout instead: a nats-server
# process (go build -o nats-server github.com/nats-io/nats-server/v2), the
# controller `herd launch --no-workers`, and each worker started by this
# script, which restarts a worker that exits non-zero once, after 1 s, as
# an orchestrator's restartPolicy OnFailure would (a learner is not
# restarted). The row's exit code is then the controller's; the learner's
# follows it.
#
# Faults: kill -9 of env worker 0, of policy worker 0, of the learner (and
# of learner 1, kill-learner-1, with a CONFIG of runtime.learners: 2), of
# the launcher itself (the controller: every worker must exit within
# 2 × TTL), SIGSTOP of the learner for 60 s, a 30 s partition of env
# worker 0, and kill -9 of one node of a 3-node NATS cluster (kill-nats).
# Processes are found by their command line (run ID and role) and
# signalled by PID.
#
# kill-nats (both modes; needs NATS_SERVER) starts its own cluster: three
# nats-server processes with JetStream, routes between them, each its own
# ports and store; the run uses all three URLs and --nats-replicas 3. The
# node with the most client connections is killed and started again 20 s
# later; the row's notes give how long the clients took to reconnect to
# the other two (their connection counts, from the servers' monitoring
# port) and what the run logged about it.
#
# The partition drops every packet of the worker's TCP connections, both
# ways, in the kernel (nftables), as a cut cable or `docker network
# disconnect` would: no reset, so TCP retransmits and the connection
# resumes if it outlives the cut. Its existing connections are matched by
# their local ports, new ones (reconnects) by moving the worker into a
# cgroup v2 whose sockets' connections are marked and dropped. Needs root,
# nft and a cgroup2 mount (CGROUP2, default /sys/fs/cgroup/unified when it
# is mounted there, else /sys/fs/cgroup); without them the row is skipped.
set -u
HERD=${1:-herd}
STEPS=${2:-200000}
CONFIG=${CONFIG:-configs/ppo-cartpole-dist-policy.yaml}
OUT=$(mktemp -d /tmp/herd-faults.XXXXXX)
NATS_PID="" CLUSTER_PIDS=() NATS_ARGS=() URL="" TTL=2s
cleanup() {
  local p
  for p in $NATS_PID "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] && echo "logs kept in $OUT" >&2 || rm -rf "$OUT"
}
trap cleanup EXIT

pid_of() { # run role → PID of that worker (slot 0)
  pgrep -f -- "--run $1 .*--role $2( |$)" | head -1
}

row() { # name run launcher-rc t0
  local name=$1 run=$2 rc=$3 t0=$4 dir="$OUT/$2"
  local wall=$(( $(date +%s) - t0 ))
  if [ -f "$dir/summary.json" ]; then
    python3 - "$name" "$rc" "$wall" "$dir/summary.json" <<'PY'
import json, sys
name, rc, wall, path = sys.argv[1:]
s = json.load(open(path))
d = s.get("dist", {})
group = ""
if d.get("dist/params_checks", 0) > 0:  # several learners
    group = ", gather resends %d, params checks %d" % (d.get("dist/gather_resends", -1), d["dist/params_checks"])
print("| %s | %s | %s, %d steps | dup %d, dropped %d, decode %d, stale %d, abandoned %d, lag mean %.1f max %d, silences %d%s | %s s |" % (
    name, rc, s["status"], s["steps"], d.get("dist/duplicates", -1), d.get("dist/dropped", -1),
    d.get("dist/decode_errors", -1), d.get("dist/stale_weights", -1), d.get("dist/abandoned", -1),
    d.get("dist/lag_mean", -1), d.get("dist/lag_max", -1), d.get("dist/silences", -1), group, wall))
PY
  else
    echo "| $name | $rc | no summary.json | – | ${wall} s |"
  fi
}

run_fault() { # ROWS (space-separated row names) limits the matrix to those rows
  case " ${ROWS:-$1} " in *" $1 "*) ;; *) return ;; esac
  local url0=$URL
  if [ "$1" = kill-nats ]; then
    if [ -z "${NATS_SERVER:-}" ] || ! start_cluster "$1"; then
      echo "| kill-nats | skipped: needs NATS_SERVER (a nats-server binary) | – | – | – |"
      return
    fi
    # A TTL above the 4–9 s leader election of a bucket that lost its
    # leader, as deploy/ uses: with 2 s a registration can expire before
    # the bucket has a leader again.
    URL=$CLUSTER_URL NATS_ARGS=(--nats-replicas 3) TTL=15s
  fi
  if [ "${MODE:-}" = noworkers ]; then run_fault_nw "$@"; else run_fault_launch "$@"; fi
  if [ "$1" = kill-nats ]; then
    # What the run itself said about the lost node.
    grep -ihE "disconnect|reconnect|connection|timeout|error" "$OUT/"*"-$1".*log 2>/dev/null | head -5 | sed 's/^/  run log: /' >&2
    stop_cluster
    URL=$url0 NATS_ARGS=() TTL=2s
  fi
}

free_ports() { # N → N distinct free TCP ports on 127.0.0.1
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# start_cluster NAME: three nats-server processes (client, route and
# monitoring port each) routed to one another; sets CLUSTER_URL,
# CLUSTER_PIDS, CLUSTER_CONF and CLUSTER_MON. Returns non-zero unless
# every node reports healthy (JetStream ready) within 30 s.
start_cluster() {
  local p=($(free_ports 9)) i j routes urls=()
  CLUSTER_PIDS=() CLUSTER_CONF=() CLUSTER_MON=()
  for i in 0 1 2; do
    routes=""
    for j in 0 1 2; do [ "$j" = "$i" ] || routes+="${routes:+, }nats://127.0.0.1:${p[3+j]}"; done
    CLUSTER_CONF[i]=$OUT/$1.n$i.conf CLUSTER_MON[i]=${p[6+i]}
    cat >"${CLUSTER_CONF[i]}" <<CONF
server_name: n$i
listen: 127.0.0.1:${p[i]}
http: 127.0.0.1:${p[6+i]}
jetstream { store_dir: "$OUT/$1.js$i" }
cluster { name: herd, listen: 127.0.0.1:${p[3+i]}, routes: [$routes] }
CONF
    "$NATS_SERVER" -c "${CLUSTER_CONF[i]}" >>"$OUT/$1.n$i.nlog" 2>&1 &
    CLUSTER_PIDS[i]=$!
    urls+=("nats://127.0.0.1:${p[i]}")
  done
  CLUSTER_URL=$(IFS=,; echo "${urls[*]}")
  local end=$(( $(date +%s) + 30 )) ok
  while [ "$(date +%s)" -lt "$end" ]; do
    ok=0
    for i in 0 1 2; do curl -sf "http://127.0.0.1:${CLUSTER_MON[i]}/healthz" >/dev/null && ok=$((ok + 1)); done
    [ "$ok" = 3 ] && return 0
    sleep 0.5
  done
  echo "  NATS cluster not healthy within 30 s" >&2
  stop_cluster
  return 1
}
stop_cluster() {
  local p
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  CLUSTER_PIDS=()
}
conns() { # node index → its client connections (empty when it does not answer)
  curl -sf "http://127.0.0.1:${CLUSTER_MON[$1]}/varz" | python3 -c 'import json, sys; print(json.load(sys.stdin)["connections"])' 2>/dev/null
}

# supervise ROLE SLOT RUN: runs a worker, restarting it once if it fails
# (not the learner); prints the worker's last exit code into $OUT/RUN.ROLE.rc.
supervise() {
  local role=$1 slot=$2 run=$3 extra=()
  [ "$role" = learner ] && extra=(--out "$OUT/$run" --quiet)
  for attempt in 1 2; do
    HERD_NATS_URL=$URL "$HERD" worker --run "$run" --ttl "$TTL" --role "$role" --slot "$slot" "${NATS_ARGS[@]}" "${extra[@]}" \
      >>"$OUT/$run.$role$slot.log" 2>&1
    local rc=$?
    echo "$rc" >"$OUT/$run.$role$slot.rc"
    if [ "$rc" = 0 ] || [ "$role" = learner ] || [ "$attempt" = 2 ]; then return; fi
    sleep 1
  done
}

run_fault_nw() { # name fault-function
  local name=$1 fault=$2 run="n-$1"
  local t0=$(date +%s)
  HERD_NATS_URL=$URL "$HERD" launch --config "$CONFIG" --steps "$STEPS" --out "$OUT/$run" --run "$run" --quiet --ttl "$TTL" \
    --no-workers "${NATS_ARGS[@]}" >"$OUT/$run.log" 2>&1 &
  local lp=$!
  sleep 1
  local ws=()
  supervise learner 0 "$run" & ws+=($!)
  supervise policy 0 "$run" & ws+=($!)
  supervise env 0 "$run" & ws+=($!)
  supervise env 1 "$run" & ws+=($!)
  sleep 4
  $fault "$run" "$lp"
  wait "$lp"
  local rc=$?
  wait "${ws[@]}"
  row "$name (no-workers)" "$run" "$rc" "$t0"
  echo "  worker exit codes: learner $(cat "$OUT/$run.learner0.rc" 2>/dev/null), policy $(cat "$OUT/$run.policy0.rc" 2>/dev/null), env $(cat "$OUT/$run.env0.rc" 2>/dev/null) $(cat "$OUT/$run.env1.rc" 2>/dev/null)" >&2
}

run_fault_launch() { # name fault-function
  local name=$1 fault=$2 run="f-$1"
  local t0=$(date +%s)
  # An empty HERD_NATS_URL: the launcher's embedded server.
  HERD_NATS_URL=$URL "$HERD" launch --config "$CONFIG" --steps "$STEPS" --out "$OUT/$run" --run "$run" --quiet --ttl "$TTL" \
    "${NATS_ARGS[@]}" >"$OUT/$run.log" 2>&1 &
  local lp=$!
  sleep 4
  $fault "$run" "$lp"
  wait "$lp"
  local rc=$?
  row "$name" "$run" "$rc" "$t0"
}

kill_role() { local p; p=$(pid_of "$1" "$2"); [ -n "$p" ] && kill -9 "$p"; echo "  killed $2 ($p)" >&2; }
f_none() { :; }
f_env() { kill_role "$1" env; }
f_policy() { kill_role "$1" policy; }
# The learner (learner 0 of a group: its command line has --out), and
# learner 1 of a group (CONFIG with runtime.learners: 2); each prints how
# long after the kill the launcher exited.
f_learner() { kill_learner "$1" "$2" "--role learner --out"; }
f_learner1() { kill_learner "$1" "$2" "--role learner --slot 1( |$)"; }
kill_learner() {
  local p; p=$(pgrep -f -- "--run $1 .*$3" | head -1)
  [ -n "$p" ] || { echo "  no learner matching \"$3\"" >&2; return 1; }
  local t=$(date +%s%N)
  kill -9 "$p"; echo "  killed learner ($p, \"$3\")" >&2
  ( while kill -0 "$2" 2>/dev/null; do sleep 0.05; done
    echo "  the launcher exited $(( ($(date +%s%N) - t) / 1000000 )) ms after the kill" >&2 ) &
}
f_stop_learner() {
  local p; p=$(pid_of "$1" learner)
  kill -STOP "$p"; echo "  stopped learner ($p) for 60 s" >&2; sleep 60; kill -CONT "$p"
}
# partition RUN ROLE SECONDS: cut the ROLE worker of slot 0 off the network.
f_partition_env() { partition "$1" env 30; }
partition() {
  local p; p=$(pgrep -f -- "--run $1 .*--role $2 --slot 0( |$)" | head -1)
  [ -n "$p" ] || { echo "  partition: no $2 worker 0 found" >&2; return 1; }
  local cg=${CGROUP2:-$( [ -d /sys/fs/cgroup/unified ] && echo /sys/fs/cgroup/unified || echo /sys/fs/cgroup)}
  local name=herd-part-$$ table=herd_part_$$
  # nft names a cgroup by its path under /sys/fs/cgroup; level 1 is its
  # depth below the cgroup2 root.
  local rel=${cg#/sys/fs/cgroup}; rel=${rel#/}${rel:+/}$name
  local ports; ports=$(ss -tnpH state established 2>/dev/null | grep "pid=$p," | awk '{print $3}' | sed 's/.*://' | sort -u | paste -sd, -)
  local by_port_out="" by_port_in=""
  if [ -n "$ports" ]; then
    by_port_out="tcp sport { $ports } counter drop; tcp dport { $ports } counter drop;"
    by_port_in="tcp dport { $ports } counter drop;"
  fi
  mkdir "$cg/$name" && echo "$p" >"$cg/$name/cgroup.procs" || { echo "  partition: cannot use cgroup $cg/$name" >&2; rmdir "$cg/$name" 2>/dev/null; return 1; }
  if ! nft -f - <<NFT; then
table inet $table {
  chain out {
    type filter hook output priority 0;
    $by_port_out
    socket cgroupv2 level 1 "$rel" ct mark set 0x48
    ct mark 0x48 counter drop
  }
  chain in {
    type filter hook input priority 0;
    $by_port_in
    ct mark 0x48 counter drop
  }
}
NFT
    echo "  partition: nft refused the rules" >&2
    echo "$p" >"$cg/cgroup.procs"; rmdir "$cg/$name"
    return 1
  fi
  echo "  partitioned $2 ($p, ports ${ports:-none}) for $3 s at $(date -u +%T)" >&2
  local t0; t0=$(date +%s%N)
  await_notice "$1" "$2-0 silent for" $(( $3 * 2 )) "$t0" "cut" &
  local waiter=$!
  sleep "$3"
  local dropped; dropped=$(nft list table inet "$table" | grep -o 'packets [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
  nft delete table inet "$table"
  echo "$p" >"$cg/cgroup.procs" 2>/dev/null
  rmdir "$cg/$name"
  echo "  healed at $(date -u +%T): $dropped packets dropped" >&2
  await_notice "$1" "$2-0 back after" 30 "$(date +%s%N)" "heal"
  wait "$waiter"
}

# await_notice RUN TEXT SECONDS T0 EVENT: waits up to SECONDS for the
# learner's notice TEXT in the run's logs and prints how long after the
# EVENT (at T0, ns) it came, with the notice.
await_notice() {
  local end=$(( $(date +%s) + $3 )) line
  while [ "$(date +%s)" -lt "$end" ]; do
    line=$(grep -h -- "$2" "$OUT/$1".*log 2>/dev/null | head -1)
    if [ -n "$line" ]; then
      echo "  noticed $(( ($(date +%s%N) - $4) / 1000000 )) ms after the $5: $line" >&2
      return
    fi
    sleep 0.2
  done
  echo "  no notice \"$2\" within $3 s of the $5" >&2
}
# f_nats: kill -9 the node serving the most clients; start it again 20 s
# later with the same config and store.
f_nats() {
  local i c victim=0 most=-1 total=0 per=""
  for i in 0 1 2; do
    c=$(conns "$i"); c=${c:-0}; total=$((total + c)) per+=" n$i:$c"
    [ "$c" -gt "$most" ] && most=$c victim=$i
  done
  local t0; t0=$(date +%s%N)
  kill -9 "${CLUSTER_PIDS[victim]}"; wait "${CLUSTER_PIDS[victim]}" 2>/dev/null
  echo "  killed NATS node n$victim (${CLUSTER_PIDS[victim]}, clients$per) at $(date -u +%T)" >&2
  local back="" n
  while [ $(( ($(date +%s%N) - t0) / 1000000000 )) -lt 20 ]; do
    if [ -z "$back" ]; then
      n=0
      per=""
      for i in 0 1 2; do [ "$i" = "$victim" ] || { c=$(conns "$i"); n=$((n + ${c:-0})) per+=" n$i:${c:-?}"; }; done
      if [ "$n" -ge "$total" ]; then
        back=$(( ($(date +%s%N) - t0) / 1000000 ))
        echo "  all $total clients on the other nodes $back ms after the kill" >&2
      fi
    fi
    sleep 0.2
  done
  [ -n "$back" ] || echo "  the other nodes had fewer than $total clients 20 s after the kill:$per" >&2
  "$NATS_SERVER" -c "${CLUSTER_CONF[victim]}" >>"${CLUSTER_CONF[victim]%.conf}.nlog" 2>&1 &
  CLUSTER_PIDS[victim]=$!
  echo "  started n$victim again at $(date -u +%T)" >&2
}
f_controller() {
  local t=$(date +%s%N)
  kill -9 "$2"
  while pgrep -f -- "--run $1 " >/dev/null; do sleep 0.1; done
  echo "  every worker of $1 gone $(( ($(date +%s%N) - t) / 1000000 )) ms after the controller's kill -9" >&2
}

if [ "${MODE:-}" = noworkers ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${NATS_SERVER:?set NATS_SERVER}" -a 127.0.0.1 -p "$port" -js -sd "$OUT/js" >"$OUT/nats.log" 2>&1 &
  NATS_PID=$!
  URL=nats://127.0.0.1:$port
  sleep 1
fi

echo "| fault | launch exit | run | counters | wall |"
echo "|---|---|---|---|---|"
run_fault none f_none
run_fault kill-env f_env
run_fault kill-policy f_policy
run_fault kill-learner f_learner
run_fault kill-learner-1 f_learner1
run_fault kill-controller f_controller
run_fault stop-learner-60s f_stop_learner
run_fault kill-nats f_nats
if [ "$(id -u)" = 0 ] && command -v nft >/dev/null && command -v ss >/dev/null; then
  run_fault partition-env-30s f_partition_env
else
  case " ${ROWS:-partition-env-30s} " in
    *" partition-env-30s "*) echo "| partition-env-30s | skipped: needs root, nft and ss | – | – | – |" ;;
  esac
fi
