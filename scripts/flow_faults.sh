#!/usr/bin/env bash
# kill -9 of a flow plan's env worker under `herd launch` (embedded NATS,
# 2 env workers): for PPO, A2C (GatherSync), IMPALA and Ape-X
# (GatherAsync), starts a run of STEPS steps, kills env worker 0 once the
# learner has written its first metrics row, and prints one row: the
# launcher's exit code, the summary's status and steps, the dist counters
# (restarts and reissued must be 1, duplicates 0) and the largest gap
# between metrics rows (the stall the restart caused). A last row kills the
# same worker with --max-restarts 0: the run must fail (exit 1).
#
#   scripts/flow_faults.sh [HERD_BINARY] [STEPS]
#
# Processes are found by their command line (run ID and role) and
# signalled by PID.
set -u
HERD=${1:-herd}
STEPS=${2:-100000}
OUT=$(mktemp -d /tmp/herd-flow-faults.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

one() { # config run [launch args…]
	local cfg=$1 run=$2
	shift 2
	local t0 load
	t0=$(date -u +%T)
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$HERD" launch --config "configs/$cfg" --steps "$STEPS" --out "$OUT/$run" --quiet --run "$run" "$@" >"$OUT/$run.out" 2>"$OUT/$run.err" &
	local launcher=$!
	for _ in $(seq 1200); do
		[ -f "$OUT/$run/.staging/metrics.csv" ] && [ "$(wc -l <"$OUT/$run/.staging/metrics.csv")" -ge 2 ] && break
		sleep 0.05
	done
	local pid
	pid=$(pgrep -f -- "worker --run $run .*--role env --slot 0" | head -1)
	[ -n "$pid" ] && kill -9 "$pid"
	wait "$launcher"
	local code=$?
	python3 - "$OUT/$run" "$cfg $*" "$code" "$t0" "$load" <<'PY'
import csv, json, sys
d, name, code, t0, load = sys.argv[1:]
try:
    s = json.load(open(d + "/summary.json"))
    rows = list(csv.DictReader(open(d + "/metrics.csv")))
except OSError as e:
    print(f"{name}: exit {code}, no run ({e}); start {t0} UTC, load {load}")
    sys.exit(0)
w = [float(r["wall_seconds"]) for r in rows]
gap = max((b - a for a, b in zip(w, w[1:])), default=0)
x = s.get("dist", {})
print(f"{name}: exit {code}, {s['status']} at {s['steps']} steps, restarts {x.get('dist/restarts')}, "
      f"reissued {x.get('dist/reissued')}, duplicates {x.get('dist/duplicates')}, largest row gap {gap:.2f} s; "
      f"start {t0} UTC, load {load}")
PY
	grep -h "^launch:\|^herd: launch" "$OUT/$run.err" | sed 's/^/    /'
}

one ppo-cartpole-flow.yaml flow-ppo
one a2c-cartpole-flow.yaml flow-a2c
one impala-cartpole.yaml flow-impala
one apex-cartpole-flow.yaml flow-apex
one ppo-cartpole-flow.yaml flow-budget --max-restarts 0
