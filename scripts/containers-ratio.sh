#!/usr/bin/env bash
# Env steps/s across containers vs in one process: for each round and each
# config, `herd train` and then the same config across containers
# (scripts/dist_containers.sh none), one after the other, so both see the
# same load; one line per pair with both env steps/s, the ratio, the
# returns, the CPU seconds (train: user+sys from /usr/bin/time where it is
# installed; containers: their cgroups, by role) and `uptime`'s load before
# train, between and after. Both sides run the same static binary.
#
#   scripts/containers-ratio.sh                            # 2 rounds, ppo and dqn, 500k steps
#   HERD_NATS_NODES=1 HERD_NETWORK=host scripts/containers-ratio.sh
#   ROUNDS=3 CONFIGS="ppo" STEPS=200000 SKIP_BUILD=1 HERD_BIN=/tmp/herd scripts/containers-ratio.sh
#
# CONFIGS: names C of configs/C-cartpole-dist.yaml (default "ppo dqn");
# ROUNDS (default 2); STEPS (default 500000); HERD_NATS_NODES, HERD_NETWORK,
# HERD_NATS_PORT and HERD_{WORKER,NATS,LEARNER}_GOMAXPROCS pass through to
# scripts/dist_containers.sh (the topology, docs/guide/distributed.md §4).
# SKIP_BUILD=1 with HERD_BIN (a static herd binary, the one in herd:local)
# skips building it and the images. KEEP=DIR keeps each pair's files in
# DIR/C-R/ (train/, containers/summary.json and cpu.txt, logs).
# Exit status: 1 when a run did not complete.
set -u
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
CONFIGS=${CONFIGS:-ppo dqn}
STEPS=${STEPS:-500000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
keep=${KEEP:-$tmp/keep}
if [ "${SKIP_BUILD:-}" = 1 ] && [ -n "${HERD_BIN:-}" ]; then bin=$HERD_BIN
else
  bin=$tmp/herd
  CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/herd || exit 2
  HERD_BIN=$bin deploy/compose/build.sh >/dev/null || exit 2
fi
field() { # summary.json field
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null
}
load() { uptime | sed 's/.*load average: //'; }
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null), $STEPS steps," \
  "nodes ${HERD_NATS_NODES:-3}, network ${HERD_NETWORK:-bridge}, GOMAXPROCS worker/nats/learner" \
  "${HERD_WORKER_GOMAXPROCS-1}/${HERD_NATS_GOMAXPROCS-1}/${HERD_LEARNER_GOMAXPROCS-}; CPU s: train user+sys, containers per cgroup"
status=0
for r in $(seq "$ROUNDS"); do
  for c in $CONFIGS; do
    d=$keep/$c-$r
    mkdir -p "$d/containers"
    l1=$(load)
    timed=()
    [ -x /usr/bin/time ] && timed=(/usr/bin/time -f '%U %S' -o "$d/train.cpu")
    "${timed[@]}" "$bin" train --config "configs/$c-cartpole-dist.yaml" --seed 1 --steps "$STEPS" --quiet --force --out "$d/train" >"$d/train.log" 2>&1 || status=1
    l2=$(load)
    # configs/C-cartpole-dist.yaml run without policy workers (inline
    # inference, DQN); HERD_POLICY_WORKERS=1 for one that has them.
    HERD_CONFIG=/configs/$c-cartpole-dist.yaml HERD_POLICY_WORKERS=${HERD_POLICY_WORKERS:-0} SKIP_BUILD=1 STEPS=$STEPS KEEP=$d \
      scripts/dist_containers.sh none >"$d/containers.log" 2>&1 || status=1
    mv "$d/none/summary.json" "$d/none/cpu.txt" "$d/containers/" 2>/dev/null
    l3=$(load)
    ts=$(field "$d/train/summary.json" sps); cs=$(field "$d/containers/summary.json" sps)
    tr=$(field "$d/train/summary.json" final_return_mean_100); cr=$(field "$d/containers/summary.json" final_return_mean_100)
    python3 - "$c" "$r" "${ts:-0}" "${cs:-0}" "${tr:-nan}" "${cr:-nan}" "$l1" "$l2" "$l3" "$d" <<'PY'
import os, sys
c, r, ts, cs, tr, cr = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
d = sys.argv[10]
ratio = cs / ts if ts else 0
cpu = ""
try:
    cpu += "CPU s train %.1f" % sum(float(x) for x in open(os.path.join(d, "train.cpu")).read().split()[-2:])
except (OSError, ValueError):
    pass
try:
    rows = [l.split() for l in open(os.path.join(d, "containers", "cpu.txt")) if l.strip()]
    by = {}
    for name, v in rows:  # env-0, env-1 → env; nats-0… → nats
        by[name.split("-")[0]] = by.get(name.split("-")[0], 0) + float(v)
    cpu += ", containers %.1f (%s)" % (sum(by.values()), ", ".join("%s %.1f" % kv for kv in sorted(by.items())))
except (OSError, ValueError):
    pass
print("%s round %s: train %.1fk, containers %.1fk env steps/s: %.2fx; returns %s / %s; %s; load %s | %s | %s" % (
    c, r, ts / 1e3, cs / 1e3, ratio, tr, cr, cpu, sys.argv[7], sys.argv[8], sys.argv[9]))
PY
  done
done
exit $status
