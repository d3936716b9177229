#!/usr/bin/env bash
# Gymnasium's own CartPole-v1 served by python/herd_env (docs/BENCHMARKS.md,
# "Remote envs"): the env's own single-env Python loop, herd's remote vector
# of 8 envs over gRPC and over shared memory, alternating in every round,
# then PPO CartPole 500k local vs the env served over gRPC and shm.
#
#   GYMNASIUM_SRC=DIR scripts/gymnasium-rows.sh
#
# DIR holds Gymnasium's source (DIR/gymnasium/__init__.py), for example a
# release's `git archive v1.3.0 gymnasium | tar -x -C DIR`; it needs numpy,
# cloudpickle and typing_extensions (Debian: python3-numpy python3-cloudpickle
# python3-typing-extensions). Gymnasium's optional farama_notifications
# import may be missing (Gymnasium catches its ImportError).
# Knobs: HERD (a built herd; default: go build), PY (default /usr/bin/python3),
# ROUNDS (3), NUM_ENVS (8), SEEDS of PPO ("1"; "" skips PPO), STEPS (500000),
# GRPC_IMPL (grpcio, or h2: the server's --grpc-impl), PROCS (0; K > 0 adds
# rows with a second server's sessions in K worker processes, --procs K,
# and the vector split over K sessions, ?inflight=K: shm, and gRPC with h2),
# PIN (a command prefix for the servers and herd's remote runs, for example
# "taskset -c 0": both ends of every request on one core; the own loop and
# the local PPO run stay unpinned).
# Run from the repository root.
set -euo pipefail
: "${GYMNASIUM_SRC:?set GYMNASIUM_SRC to a directory that holds the gymnasium package}"
[ -f "$GYMNASIUM_SRC/gymnasium/__init__.py" ] || { echo "no gymnasium/__init__.py under $GYMNASIUM_SRC" >&2; exit 2; }
PY=${PY:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
NUM_ENVS=${NUM_ENVS:-8}
SEEDS=${SEEDS-1}
STEPS=${STEPS:-500000}
PROCS=${PROCS:-0}
GRPC_IMPL=${GRPC_IMPL:-grpcio}
read -r -a PIN <<<"${PIN:-}"
D=$(mktemp -d)
SHM=gymrows$$
srv=
cleanup() { for p in $srv; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
H=${HERD:-$D/herd}
[ -n "${HERD:-}" ] || go build -o "$H" ./cmd/herd
export PYTHONPATH="$PWD/python:$GYMNASIUM_SRC"
KW='{"id": "CartPole-v1"}'
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs," \
  "gymnasium $("$PY" -c 'import gymnasium; print(gymnasium.__version__)' 2>/dev/null), --grpc-impl $GRPC_IMPL, pin: ${PIN[*]:-none}"

# Each transport has a server process of its own: shm messages to a process
# that has served gRPC sessions are slower (service/envsvc's
# BenchmarkRemoteVectorStepPython). serve NAME ARGS... starts one, waits
# until it serves, and sets srv_NAME (its pid) and port_NAME (its gRPC
# port; empty for shm only).
serve() {
  local log=$1
  shift
  "${PIN[@]}" "$PY" -m herd_env.serve --env gymnasium:make --kwargs "$KW" "$@" >"$D/$log.log" 2>&1 &
  eval "srv_$log=$!"
  for _ in $(seq 100); do grep -q ' on \(port\|shm\) ' "$D/$log.log" && break; sleep 0.1; done
  grep -q ' on \(port\|shm\) ' "$D/$log.log" || { cat "$D/$log.log" >&2; exit 1; }
  eval "port_$log=$(awk '/ on port /{print $NF}' "$D/$log.log")"
}
srv_g= srv_s= srv_gp= srv_sp=
serve g --port 0 --grpc-impl "$GRPC_IMPL"
serve s --port -1 --shm "$SHM"
if [ "$PROCS" -gt 0 ]; then
  serve sp --port -1 --shm "${SHM}p" --procs "$PROCS"
  [ "$GRPC_IMPL" != h2 ] || serve gp --port 0 --grpc-impl h2 --procs "$PROCS"
fi
srv="$srv_g $srv_s $srv_gp $srv_sp"

# steps/s of one JSON line's field, rounded.
field() { "$PY" -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]]))' "$1"; }

# A server's user+system CPU time in clock ticks (/proc/PID/stat), with its
# children's (a --procs server's worker processes).
srvcpu() { "$PY" -c '
import glob, sys
def cpu(pid):
    s = open("/proc/%s/stat" % pid).read(); f = s[s.rindex(")")+2:].split(); return int(f[11]) + int(f[12])
kids = []
for t in glob.glob("/proc/%s/task/*/children" % sys.argv[1]):
    kids += open(t).read().split()
print(cpu(sys.argv[1]) + sum(cpu(p) for p in kids))' "$1"; }
TICK=$(getconf CLK_TCK)
# remote grpc|shm|grpcp|shmp: prints "steps/s server-CPU-µs-per-env-step" for one 1 s
# measurement (herd bench remote env; its steps are about steps/s x 1 s).
remote() {
  local c0 c1 sps p to
  local more=()
  case $1 in
    grpc) p=$srv_g to=(--addr "127.0.0.1:$port_g") ;;
    shm) p=$srv_s to=(--shm "$SHM") ;;
    grpcp) p=$srv_gp to=(--addr "127.0.0.1:$port_gp") more=(--inflight "$PROCS") ;;
    shmp) p=$srv_sp to=(--shm "${SHM}p") more=(--inflight "$PROCS") ;;
  esac
  c0=$(srvcpu "$p")
  sps=$("${PIN[@]}" "$H" bench remote env "${to[@]}" --id CartPole-v1 --num-envs "$NUM_ENVS" "${more[@]}" --rounds 1 --duration 1s --json | field remote_steps_per_s)
  c1=$(srvcpu "$p")
  "$PY" -c 'import sys; sps,c0,c1,tick=map(float,sys.argv[1:5]); print(int(sps), round((c1-c0)/tick/sps*1e6, 2))' "$sps" "$c0" "$c1" "$TICK"
}

echo "== steps/s: the env's own single-env Python loop vs herd's remote vector of $NUM_ENVS (wall ratio: remote / own loop;"
echo "   cpu: µs of CPU per env step, own loop vs the server's, whose ratio bounds the wall ratio on a machine with a core each)"
for r in $(seq "$ROUNDS"); do
  l0=$(load)
  ownj=$("$PY" -m herd_env.bench --env gymnasium:make --kwargs "$KW" --steps 100000 --repeats 1 | tail -1)
  read -r g gc <<<"$(remote grpc)"
  read -r s sc <<<"$(remote shm)"
  sp=0 spc=0 gp=0 gpc=0
  [ "$PROCS" -eq 0 ] || read -r sp spc <<<"$(remote shmp)"
  [ "$PROCS" -eq 0 ] || [ "$GRPC_IMPL" != h2 ] || read -r gp gpc <<<"$(remote grpcp)"
  "$PY" -c '
import json, sys
j = json.loads(sys.argv[1]); o, oc = j["median_steps_per_s"], 1e6 / j["median_steps_per_cpu_s"]
g, gc, s, sc = map(float, sys.argv[2:6])
print("round %s: own loop %d/s (cpu %.2f µs), gRPC %d/s (%.2fx; server cpu %.2f µs, %.2fx), shm %d/s (%.2fx; server cpu %.2f µs, %.2fx), load %s -> %s"
      % (sys.argv[6], o, oc, g, g / o, gc, oc / gc, s, s / o, sc, oc / sc, sys.argv[7], sys.argv[8]))
sp, spc, gp, gpc = map(float, sys.argv[9:13])
if sp:
    print("         %s worker processes, inflight=%s: gRPC %d/s (%.2fx; server cpu %.2f µs), shm %d/s (%.2fx; server cpu %.2f µs)"
          % (sys.argv[13], sys.argv[13], gp, gp / o, gpc, sp, sp / o, spc))' \
    "$ownj" "$g" "$gc" "$s" "$sc" "$r" "$l0" "$(load)" "$sp" "$spc" "$gp" "$gpc" "$PROCS"
done

[ -n "$SEEDS" ] || exit 0
echo "== PPO CartPole $STEPS steps (configs/ppo-cartpole.yaml): wall s, local herd CartPole-v1 vs Gymnasium's served"
tensors() { "$PY" - "$1" <<'PY'
import hashlib, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
print(hashlib.sha256(b[8 + n:]).hexdigest()[:16])
PY
}
kinds="local grpc shm"
[ "$PROCS" -eq 0 ] || kinds="$kinds shmp"
[ "$PROCS" -eq 0 ] || [ "$GRPC_IMPL" != h2 ] || kinds="$kinds grpcp"
for seed in $SEEDS; do
  for e in $kinds; do
    case $e in
      local) id=CartPole-v1 ;;
      grpc) id=grpc://127.0.0.1:$port_g/CartPole-v1 ;;
      shm) id=shm://$SHM/CartPole-v1 ;;
      shmp) id="shm://${SHM}p/CartPole-v1?inflight=$PROCS" ;;
      grpcp) id="grpc://127.0.0.1:$port_gp/CartPole-v1?inflight=$PROCS" ;;
    esac
    l0=$(load)
    pin=("${PIN[@]}")
    [ "$e" != local ] || pin=()
    "${pin[@]}" "$H" train --config configs/ppo-cartpole.yaml --env "$id" --seed "$seed" --steps "$STEPS" --quiet --force --out "$D/ppo-$e-$seed" >/dev/null
    "$PY" - "$D/ppo-$e-$seed/summary.json" "$e" "$seed" "$l0" "$(load)" "$(tensors "$D/ppo-$e-$seed/model.safetensors")" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("seed %s %-5s wall %6.1f s  return %6.2f  load %s -> %s  weights %s" % (
    sys.argv[3], sys.argv[2], s["wall_seconds"], s["final_return_mean_100"], sys.argv[4], sys.argv[5], sys.argv[6]))
PY
  done
done
