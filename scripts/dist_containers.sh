#!/usr/bin/env bash
# A distributed PPO CartPole run across containers (deploy/compose: 3 NATS
# nodes with JetStream R3, the controller and one container per worker on a
# private network, images built FROM scratch by deploy/compose/build.sh),
# and the fault matrix: one fresh compose project per row, the fault
# injected FAULT_AT seconds (default 1) after the learner's first progress
# line, itself 5 s into training; one table row per fault.
#
#   scripts/dist_containers.sh                 # build the images, run every row
#   SKIP_BUILD=1 STEPS=100000 scripts/dist_containers.sh none kill-env
#   KEEP=DIR scripts/dist_containers.sh none   # keep each row's summary.json, logs and cpu.txt in DIR/ROW/
#   HERD_CONFIG=/configs/dqn-cartpole-dist.yaml HERD_POLICY_WORKERS=0 scripts/dist_containers.sh none
#   HERD_NATS_NODES=1 HERD_NETWORK=host scripts/dist_containers.sh none   # one NATS server, host network
#
# HERD_CONFIG (a path in the image, default
# /configs/ppo-cartpole-dist-policy.yaml) and HERD_POLICY_WORKERS (0 or
# the default 1: a config without policy workers, inline inference or an
# off-policy algorithm, takes 0, or policy-0 fails and restarts until the
# run ends) reach compose.yaml from the environment.
#
# Rows: none, kill-env, kill-policy, kill-learner, crash-learner,
# kill-controller, kill-nats (one of the 3 nodes, started again 20 s
# later), partition-env (env-0 off the network for 30 s), pause-learner
# (docker pause, 60 s). `docker kill` marks a container stopped by hand, so
# Docker's restart policy leaves it down: this script starts a killed env
# or policy worker or learner again 1 s later, as an orchestrator would.
# crash-learner SIGKILLs the learner's process from the host instead, which
# Docker takes for a crash: its restart policy (on-failure) starts it
# again. A restarted learner resumes the run from its newest checkpoint;
# the controller is not restarted.
#
# Exit status: 1 when a row that must complete (every row but
# kill-controller and pause-learner, whose runs end without their learner)
# did not; docker or compose missing: 2. "dup" is dist/duplicates: pushes
# repeated after a lost ack, recognised by their sample id and not learned
# again. With KEEP, DIR/ROW/cpu.txt has each container's CPU seconds (its
# cgroup's usage, read every 0.25 s while it runs, so its last 0.25 s at
# most are missed; cgroup v1, or v2 with the cgroupfs or systemd driver).
#
# HERD_NATS_GOMAXPROCS, HERD_WORKER_GOMAXPROCS (default 1) and
# HERD_LEARNER_GOMAXPROCS (default empty: Go's) reach the compose files from
# the environment, as HERD_NATS_PORT (single-host.yaml, default 4222) does.
set -u
cd "$(dirname "$0")/.."
STEPS=${STEPS:-300000}
FAULT_AT=${FAULT_AT:-1}
# The topology: HERD_NATS_NODES=3 (default; compose.yaml) or 1 (one NATS
# server, buckets R1: single.yaml), HERD_NETWORK=bridge (default: a private
# network) or host (the host's network, NATS on 127.0.0.1:$HERD_NATS_PORT,
# default 4222; one node only: single-host.yaml).
case ${HERD_NATS_NODES:-3}/${HERD_NETWORK:-bridge} in
3/bridge) F=deploy/compose/compose.yaml ;;
1/bridge) F=deploy/compose/single.yaml ;;
1/host) F=deploy/compose/single-host.yaml ;;
*) echo "HERD_NATS_NODES=${HERD_NATS_NODES:-} HERD_NETWORK=${HERD_NETWORK:-}: want 3/bridge, 1/bridge or 1/host" >&2; exit 2 ;;
esac
ROWS=("$@")
[ ${#ROWS[@]} -eq 0 ] && ROWS=(none kill-env kill-policy kill-learner crash-learner kill-controller kill-nats partition-env pause-learner)

if ! docker info >/dev/null 2>&1; then echo "docker: daemon not reachable" >&2; exit 2; fi
if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then COMPOSE=(docker-compose)
else echo "neither docker compose nor docker-compose found" >&2; exit 2; fi
[ "${SKIP_BUILD:-}" = 1 ] || deploy/compose/build.sh || exit 2

P=""
cleanup() {
  [ -n "${cpu_pid:-}" ] && kill "$cpu_pid" 2>/dev/null
  [ -n "${cpud:-}" ] && rm -rf "$cpud"
  cpu_pid="" cpud=""
  [ -n "$P" ] && "${COMPOSE[@]}" -f "$F" -p "$P" down -v -t 5 >/dev/null 2>&1; P=""; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

cid() { "${COMPOSE[@]}" -f "$F" -p "$P" ps -q "$1"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
exits() { # service → "exit(restarts)"
  docker inspect -f '{{.State.ExitCode}}{{if .State.Running}}(running){{end}}/{{.RestartCount}}' "$(cid "$1")"
}
herd_services=(controller learner env-0 env-1 policy-0)
[ "${HERD_POLICY_WORKERS:-1}" = 0 ] && herd_services=(controller learner env-0 env-1)

fault() { # row
  case $1/${HERD_NATS_NODES:-3}/${HERD_NETWORK:-bridge} in
  kill-nats/1/*) echo "kill-nats needs HERD_NATS_NODES=3" >&2; return 1 ;;
  partition-env/*/host) echo "partition-env needs HERD_NETWORK=bridge" >&2; return 1 ;;
  esac
  case $1 in
  none) ;;
  kill-env) docker kill "$(cid env-0)" >/dev/null; sleep 1; docker start "$(cid env-0)" >/dev/null ;;
  kill-policy) docker kill "$(cid policy-0)" >/dev/null; sleep 1; docker start "$(cid policy-0)" >/dev/null ;;
  kill-learner) docker kill "$(cid learner)" >/dev/null; sleep 1; docker start "$(cid learner)" >/dev/null ;;
  crash-learner) # Pid 0 (the learner already ended) would be this script's group.
    pid=$(docker inspect -f '{{.State.Pid}}' "$(cid learner)")
    [ "${pid:-0}" -gt 0 ] || { echo "crash-learner: the learner is not running" >&2; return 1; }
    kill -9 "$pid" ;;
  kill-controller) docker kill "$(cid controller)" >/dev/null ;;
  kill-nats) docker kill "$(cid nats-1)" >/dev/null; sleep 20; docker start "$(cid nats-1)" >/dev/null ;;
  partition-env)
    docker network disconnect "${P}_herd" "$(cid env-0)"; sleep 30
    docker network connect --alias env-0 "${P}_herd" "$(cid env-0)" ;;
  pause-learner) docker pause "$(cid learner)" >/dev/null; sleep 60; docker unpause "$(cid learner)" >/dev/null ;;
  *) echo "unknown row $1" >&2; return 1 ;;
  esac
}

usage() { # container id → u: CPU ns its cgroup has used ("" when none)
  local f k v
  u=""
  for f in /sys/fs/cgroup/cpuacct/docker/"$1"/cpuacct.usage /sys/fs/cgroup/cpu,cpuacct/docker/"$1"/cpuacct.usage; do
    [ -r "$f" ] && read -r u <"$f" && return
  done
  for f in /sys/fs/cgroup/system.slice/docker-"$1".scope/cpu.stat /sys/fs/cgroup/docker/"$1"/cpu.stat; do
    [ -r "$f" ] || continue
    while read -r k v; do [ "$k" = usage_usec ] && { u=${v}000; return; }; done <"$f"
  done
}
cpu_watch() { # dir: DIR/ID holds the last usage of each running container
  local d id
  while :; do
    for d in /sys/fs/cgroup/cpuacct/docker/*/ /sys/fs/cgroup/cpu,cpuacct/docker/*/ \
      /sys/fs/cgroup/system.slice/docker-*.scope/ /sys/fs/cgroup/docker/*/; do
      [ -d "$d" ] || continue
      id=${d%/}; id=${id##*/}; id=${id#docker-}; id=${id%.scope}
      usage "$id"
      [ -n "$u" ] && echo "$u" >"$1/$id"
    done
    sleep 0.25
  done
}
cpu_report() { # dir: "service CPU-s" for each container of the project
  local f p s
  for f in "$1"/*; do
    [ -f "$f" ] || continue
    read -r p s < <(docker inspect -f '{{index .Config.Labels "com.docker.compose.project"}} {{index .Config.Labels "com.docker.compose.service"}}' "${f##*/}" 2>/dev/null)
    [ "$p" = "$P" ] && printf '%s %.2f\n' "$s" "$(($(<"$f") / 1000000))e-3"
  done | sort
}

status=0
echo "| fault | controller exit | learner, env-0, env-1, policy-0 exit/restarts | run | dist counters | fault → controller exit |"
echo "|---|---:|---|---|---|---:|"
for row in "${ROWS[@]}"; do
  P="herdct-$row-$$"
  P=${P//[^a-z0-9-]/}
  cpu_pid=""
  if [ -n "${KEEP:-}" ]; then cpud=$(mktemp -d); cpu_watch "$cpud" & cpu_pid=$!; fi
  HERD_STEPS=$STEPS "${COMPOSE[@]}" -f "$F" -p "$P" up -d >/dev/null 2>&1 || { echo "$row: compose up failed" >&2; status=1; cleanup; continue; }
  # The fault lands FAULT_AT s after the learner's first progress line
  # (5 s into training), not after `up`, whose own time varies with load.
  for _ in $(seq 600); do
    docker logs "$(cid learner)" 2>&1 | grep -q ' step [0-9]' && break
    [ "$(docker inspect -f '{{.State.Running}}' "$(cid learner)")" = true ] || break
    sleep 0.5
  done
  sleep "$FAULT_AT"
  tf=$(now)
  note=""
  fault "$row" || { note=" (fault not injected)"; status=1; }
  ctl=$(cid controller)
  # The controller is the run's end; a killed one already ended, so then
  # wait for the workers (each must go within 2 TTLs of 15 s).
  if [ "$row" = kill-controller ]; then wait_on=("${herd_services[@]:1}"); else wait_on=(controller); fi
  for s in "${wait_on[@]}"; do timeout 900 docker wait "$(cid "$s")" >/dev/null; done
  te=$(now)
  # The workers end after the controller; give them their TTLs.
  for s in "${herd_services[@]}"; do timeout 60 docker wait "$(cid "$s")" >/dev/null 2>&1; done
  rc=$(docker inspect -f '{{.State.ExitCode}}' "$ctl")
  out=${KEEP:-}/$row
  sum=$(docker cp "$(cid learner)":/runs/ppo-1/summary.json - 2>/dev/null | tar -xO 2>/dev/null)
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$out"
    kill "$cpu_pid" 2>/dev/null; wait "$cpu_pid" 2>/dev/null; cpu_pid=""
    cpu_report "$cpud" >"$out/cpu.txt"
    [ -n "$sum" ] && printf '%s\n' "$sum" >"$out/summary.json"
    "${COMPOSE[@]}" -f "$F" -p "$P" logs --no-color >"$out/logs.txt" 2>&1
  fi
  ex="$(exits learner), $(exits env-0), $(exits env-1), $([ "${HERD_POLICY_WORKERS:-1}" = 0 ] && echo – || exits policy-0)"
  if [ -n "$sum" ]; then
    res=$(printf '%s' "$sum" | python3 -c '
import json, sys
s = json.load(sys.stdin); d = s.get("dist", {})
print("%s, %d steps%s, return %.1f | dup %d, discarded %d, dropped %d, decode %d, stale %d, abandoned %d; lag mean %.1f max %d" % (
    s["status"], s["steps"], ", resumed from %d" % s["resumed_from_step"] if "resumed_from_step" in s else "",
    s.get("final_return_mean_100", -1), d.get("dist/duplicates", -1), d.get("dist/discarded", -1), d.get("dist/dropped", -1),
    d.get("dist/decode_errors", -1), d.get("dist/stale_weights", -1), d.get("dist/abandoned", -1), d.get("dist/lag_mean", -1), d.get("dist/lag_max", -1)))')
  else
    res="no summary.json | –"
  fi
  echo "| $row$note | $rc | $ex | $res | $(since "$tf" "$te") s |"
  case $row in kill-controller|pause-learner) ;; *) [[ $rc = 0 && $res = completed* ]] || status=1 ;; esac
  cleanup
done
exit $status
