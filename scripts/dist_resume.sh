#!/usr/bin/env bash
# kill -9 of the learner under `herd launch`, mid-run, against an
# uninterrupted run of each seed: launch restarts the killed learner, which
# resumes from the run directory's newest checkpoint (docs/guide/resume.md,
# "Distributed runs"). One table row per run.
#
#   scripts/dist_resume.sh                                  # PPO CartPole, inline env workers
#   scripts/dist_resume.sh configs/ppo-cartpole-dist-policy.yaml
#   SEEDS="1 2 3" KILL_AT=200000 scripts/dist_resume.sh     # the defaults
#
# The kill lands once a checkpoint at or past step KILL_AT is written.
# "kill → resumed" is the time from the kill to the restarted learner's
# "resuming from step" line. Exit status 1 when a run did not complete
# with exit 0; its log is copied to KEEP_FAILED (default /tmp).
set -u
cd "$(dirname "$0")/.."
CFG=${1:-configs/ppo-cartpole-dist.yaml}
SEEDS=${SEEDS:-1 2 3}
KILL_AT=${KILL_AT:-200000}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
go build -o "$T/herd" ./cmd/herd || exit 1
now() { date +%s.%N; }
status=0
echo "| seed | run | exit | steps | resumed from | kill → resumed | return (last 100) | dup | discarded | dropped | stale |"
echo "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
for seed in $SEEDS; do
  for mode in plain kill-9; do
    out=$T/$mode-$seed
    "$T/herd" launch --config "$CFG" --seed "$seed" --out "$out" --quiet >"$T/log" 2>&1 &
    pid=$!
    took=–
    if [ "$mode" = kill-9 ]; then
      while kill -0 "$pid" 2>/dev/null; do
        ck=$(ls "$out/checkpoints" 2>/dev/null | sed -n 's/^state-0*\([0-9][0-9]*\)\.herdstate$/\1/p' | sort -n | tail -1)
        [ -n "$ck" ] && [ "$ck" -ge "$KILL_AT" ] && break
        sleep 0.05
      done
      lp=$(pgrep -f -- "--role learner --out $out" | head -1)
      tk=$(now)
      [ -n "$lp" ] && kill -9 "$lp"
      while kill -0 "$pid" 2>/dev/null && ! grep -q "resuming from step" "$T/log"; do sleep 0.05; done
      grep -q "resuming from step" "$T/log" && took=$(python3 -c "import sys; print('%.1f s' % (float(sys.argv[2]) - float(sys.argv[1])))" "$tk" "$(now)")
    fi
    wait "$pid"
    rc=$?
    if [ -f "$out/summary.json" ]; then
      res=$(python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); d = s.get("dist", {})
print("%d | %s | {took} | %.1f | %d | %d | %d | %d" % (s["steps"], s.get("resumed_from_step", "–"), s["final_return_mean_100"],
      d["dist/duplicates"], d["dist/discarded"], d["dist/dropped"], d["dist/stale_weights"]))
PY
)
      res=${res/\{took\}/$took}
    else
      res="– | – | $took | – | – | – | – | $(grep -o 'cannot resume[^;]*' "$T/log" | head -1)"
    fi
    echo "| $seed | $mode | $rc | $res |"
    [ "$rc" = 0 ] || { status=1; cp "$T/log" "${KEEP_FAILED:-/tmp}/dist_resume-$mode-$seed.log"; tail -5 "$T/log" >&2; }
  done
done
exit $status
