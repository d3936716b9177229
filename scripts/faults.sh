#!/usr/bin/env bash
# Fault table (docs/BENCHMARKS.md "Faults: interruptions, kills, full disks,
# bad input"): reruns the fault probe's cases against a freshly built herd and
# prints one Markdown row per case: what was done, what herd did (exit status
# and what was left), and whether that is what herd promises.
#
#   scripts/faults.sh            # every row
#   scripts/faults.sh ROW...     # only these groups of rows: signals kills
#       launcher crashloop runid inline double hts persist cpuprofile
#       messages outage leftovers disk replaydisk invalid controller tls
#
# Cases: Ctrl-C in a terminal (SIGINT to herd launch's whole process group),
# SIGTERM to the launcher, kill -9 of each launch role, a failed `train
# --force` and a metrics.csv write on a full disk, `serve replay` (sync and
# writeback) on a full disk, unknown subcommands, explicit invalid values,
# absurd worker counts. Full disks are small tmpfs mounts, which need root;
# without root those rows say "skipped" and the same faults are covered by
# the fault-injecting filesystem tests (go test ./replay/persist
# ./service/replaysvc -run 'DiskFull|FullDisk'; ./algo -run 'ForcedRun').
set -uo pipefail
cd "$(dirname "$0")/.."
ONLY=" $* "
want() { [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $1 "* ]]; }
T=$(mktemp -d)
MNT=()
cleanup() {
  local m
  for m in "${MNT[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  rm -rf "$T" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM # through the EXIT trap
go build -o "$T/herd" ./cmd/herd || exit 1
H="$T/herd"
CFG=configs/ppo-cartpole-dist-policy.yaml
PY=/usr/bin/python3

row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }
ok() { if [ "${1:-}" = 1 ]; then echo "yes"; else echo "**no**"; fi; }
sha() { (cd "$1" && sha256sum model.safetensors metrics.csv summary.json curve.png config.yaml 2>/dev/null); }
status_of() {
  $PY -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s.get("status","?") + ("" if s.get("status") != "failed" else " (" + s.get("reason","")[:80] + ")"))' "$1/summary.json" 2>/dev/null || echo "no summary.json"
}

# tmpfs SIZE: mounts a tmpfs and sets M to it, or M="" without root.
tmpfs() {
  M="$T/mnt$RANDOM"
  mkdir -p "$M"
  if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size="$1" tmpfs "$M" 2>/dev/null; then
    MNT+=("$M")
  else
    M=""
  fi
}
fill() { dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null; sync; }
# nats_server: builds an external NATS server into $NS once (false when
# it cannot be built).
NS="$T/nats-server"
nats_server() { [ -x "$NS" ] || go build -o "$NS" github.com/nats-io/nats-server/v2 2>/dev/null; }

# launch_bg OUT [CONFIG]: starts herd launch (of $CFG by default) in its
# own session (process group) and waits for the learner's first metrics row.
launch_bg() {
  setsid "$H" launch --config "${2:-$CFG}" --steps 5000000 --quiet --out "$1" >"$T/launch.log" 2>&1 &
  LPID=$!
  for _ in $(seq 1 600); do
    [ -s "$1/.staging/metrics.csv" ] && [ "$(wc -l <"$1/.staging/metrics.csv")" -ge 2 ] && return 0
    sleep 0.1
  done
  return 1
}
# pid_of ROLE-SLOT: the worker process launched by $LPID with that role.
pid_of() {
  local pat="--role ${1%-*} --slot ${1#*-}"
  [ "$1" = learner-0 ] && pat="--role learner"
  for p in $(pgrep -P "$LPID"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "$pat" && echo "$p"
  done | head -1
}
# alive PID…: how many still run (zombies waiting for a reaper do not count).
alive() {
  local n=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat")" != Z ] && n=$((n + 1))
  done
  echo $n
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| case | what herd did | as promised |"
echo "|---|---|---|"

if want signals; then
# --- herd launch: signals ---
O="$T/ctrlc"
if launch_bg "$O"; then
  kill -INT -- -"$LPID"
  wait "$LPID"; rc=$?
  st=$(status_of "$O")
  row "launch: Ctrl-C in a terminal (SIGINT to the process group)" "exit $rc, summary $st, second signal: $(grep -c 'again: exiting at once' "$T/launch.log")" "$(ok $([ "$rc" = 130 ] && [ "$st" = interrupted ] && echo 1))"
else row "launch: Ctrl-C in a terminal" "learner never wrote a row: $(tail -1 "$T/launch.log")" "**no**"; kill -9 -- -"$LPID" 2>/dev/null; fi

O="$T/term"
if launch_bg "$O"; then
  kill -TERM "$LPID"
  wait "$LPID"; rc=$?
  st=$(status_of "$O")
  row "launch: SIGTERM to the launcher" "exit $rc, summary $st" "$(ok $([ "$rc" = 130 ] && [ "$st" = interrupted ] && echo 1))"
else row "launch: SIGTERM to the launcher" "learner never wrote a row" "**no**"; kill -9 -- -"$LPID" 2>/dev/null; fi
fi

if want kills; then
# --- herd launch: kill -9 of each role ---
for role in env-0 policy-0; do
  O="$T/k9$role"
  if launch_bg "$O"; then
    p=$(pid_of "$role")
    kill -9 "$p" 2>/dev/null
    sleep 3
    restarted=$(grep -c "exited" "$T/launch.log")
    kill -INT -- -"$LPID"
    wait "$LPID"; rc=$?
    row "launch: kill -9 of the $role worker" "restarted ($restarted restart line), then Ctrl-C: exit $rc, summary $(status_of "$O")" "$(ok $([ "$restarted" -ge 1 ] && [ "$rc" = 130 ] && echo 1))"
  else row "launch: kill -9 of $role" "learner never wrote a row" "**no**"; kill -9 -- -"$LPID" 2>/dev/null; fi
done
O="$T/k9learner"
if launch_bg "$O"; then
  kill -9 "$(pid_of learner-0)"; t0=$(date +%s.%N)
  for _ in $(seq 1 600); do grep -q "resuming from step" "$T/launch.log" && break; sleep 0.05; done
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  resumed=$(grep -o 'resuming from step [0-9]*' "$T/launch.log" | head -1)
  sleep 2
  kill -INT -- -"$LPID"
  wait "$LPID"; rc=$?
  row "launch: kill -9 of the learner" "restarted, \"$resumed\" $(printf %.1f "$dt") s after the kill; then Ctrl-C: exit $rc, summary $(status_of "$O")" "$(ok $([ -n "$resumed" ] && [ "$rc" = 130 ] && [ "$(status_of "$O")" = interrupted ] && echo 1))"
else row "launch: kill -9 of the learner" "learner never wrote a row" "**no**"; kill -9 -- -"$LPID" 2>/dev/null; fi
fi

if want launcher; then
# kill -9 of the launcher in each topology: on-policy with policy workers
# ($CFG), Ape-X (dist, the learner owns the replay), and flow plans
# (on-policy and Ape-X): the learner gets SIGHUP and saves.
for c in "$CFG" configs/dqn-cartpole-dist.yaml configs/ppo-cartpole-flow.yaml configs/apex-cartpole-flow.yaml; do
  O="$T/k9launcher-$(basename "$c" .yaml)"
  if launch_bg "$O" "$c"; then
    kids=$(pgrep -P "$LPID")
    kill -9 "$LPID"
    t0=$(date +%s.%N)
    wait "$LPID" 2>/dev/null
    for _ in $(seq 1 300); do [ -s "$O/summary.json" ] && break; sleep 0.1; done
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    # shellcheck disable=SC2086
    for _ in $(seq 1 150); do [ "$(alive $kids)" = 0 ] && break; sleep 0.1; done
    dt2=$(echo "$(date +%s.%N) - $t0" | bc)
    # shellcheck disable=SC2086
    left=$(alive $kids)
    st=$(status_of "$O")
    row "launch $(basename "$c"): kill -9 of the launcher" "learner saved the run (summary $st) $(printf %.1f "$dt") s later; $left worker processes left after $(printf %.1f "$dt2") s" "$(ok $([ "$left" = 0 ] && [ "$st" = interrupted ] && echo 1))"
  else row "launch $(basename "$c"): kill -9 of the launcher" "learner never wrote a row" "**no**"; kill -9 -- -"$LPID" 2>/dev/null; fi
done
fi

if want crashloop; then
# A worker past --max-restarts: env worker 0's metrics port is taken, so it
# fails at every start (the learner serves at P, the policy worker P+1).
O="$T/crashloop"
P=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$PY -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' $((P + 2)) &
HOLD=$!
sleep 0.3
t0=$(date +%s.%N)
timeout 120 "$H" launch --config "$CFG" --steps 5000000 --quiet --out "$O" --max-restarts 2 --metrics-addr "127.0.0.1:$P" >"$T/launch.log" 2>&1
rc=$?
dt=$(echo "$(date +%s.%N) - $t0" | bc)
kill "$HOLD" 2>/dev/null
st=$(status_of "$O")
row "launch: env worker 0 fails past --max-restarts 2" "exit $rc after $(printf %.1f "$dt") s ($(grep -o 'env worker 0 failed [0-9]* times' "$T/launch.log" | head -1)); summary $st" "$(ok $([ "$rc" = 1 ] && [ "${st%% *}" = failed ] && echo 1))"
fi

if want runid; then
# A second launch of an active run ID on the same (external) NATS.
if nats_server; then
  "$NS" -a 127.0.0.1 -p 14222 -js -sd "$T/js" >/dev/null 2>&1 &
  NPID=$!
  sleep 1
  O="$T/first"
  setsid "$H" launch --config "$CFG" --steps 5000000 --quiet --out "$O" --nats nats://127.0.0.1:14222 --run taken >"$T/launch.log" 2>&1 &
  LPID=$!
  for _ in $(seq 1 600); do [ -s "$O/.staging/metrics.csv" ] && [ "$(wc -l <"$O/.staging/metrics.csv")" -ge 2 ] && break; sleep 0.1; done
  t0=$(date +%s.%N)
  timeout 60 "$H" launch --config "$CFG" --quiet --out "$T/second" --nats nats://127.0.0.1:14222 --run taken >/dev/null 2>"$T/err"
  rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  kill -INT -- -"$LPID"
  wait "$LPID"; rc1=$?
  row "launch: a second launch of an active --run on the same NATS" "exit $rc in $(printf %.2f "$dt") s: $(grep -o 'is active[^;]*' "$T/err" | head -1); the first run then Ctrl-C: exit $rc1, summary $(status_of "$O")" "$(ok $([ "$rc" = 1 ] && [ "$rc1" = 130 ] && echo 1))"
  kill "$NPID"; wait "$NPID" 2>/dev/null
else row "launch: a second launch of an active --run" "skipped: nats-server could not be built" "–"; fi
fi

if want inline; then
# One env worker paused (SIGSTOP) 20 s under inference inline, 3 trials:
# env steps the learner took in the 20 s before the pause and during it.
res="" good=0
for trial in 1 2 3; do
  O="$T/stop$trial"
  setsid "$H" launch --config configs/ppo-cartpole-dist.yaml --steps 50000000 --quiet --out "$O" >"$T/launch.log" 2>&1 &
  LPID=$!
  for _ in $(seq 1 600); do [ -s "$O/.staging/metrics.csv" ] && [ "$(wc -l <"$O/.staging/metrics.csv")" -ge 2 ] && break; sleep 0.1; done
  sleep 2
  p=$(pid_of env-0)
  sa=$(tail -1 "$O/.staging/metrics.csv" | cut -d, -f1)
  sleep 20
  s0=$(tail -1 "$O/.staging/metrics.csv" | cut -d, -f1)
  kill -STOP "$p"
  sleep 20
  s1=$(tail -1 "$O/.staging/metrics.csv" | cut -d, -f1)
  kill -CONT "$p"
  sleep 1
  kill -INT -- -"$LPID"
  wait "$LPID"; rc=$?
  n=$(grep -c 'silent for' "$T/launch.log")
  res="$res${res:+; }$((s0 - sa)) before, $((s1 - s0)) during, $n notices, exit $rc"
  [ $((s1 - s0)) -gt 0 ] && [ "$n" -ge 1 ] && [ "$rc" = 130 ] && good=$((good + 1))
done
row "launch, inference inline: env worker 0 SIGSTOPped 20 s (3 trials)" "env steps learned in the 20 s before the pause and during it, silence notices, exit after Ctrl-C: $res" "$(ok $([ "$good" = 3 ] && echo 1))"
fi

if want double; then
# Ctrl-C, then a second one 0–60 ms later, on an interrupted --force
# train: the commit finishes first, so the directory is never torn.
O="$T/double"
"$H" train --algo ppo --env CartPole-v1 --steps 2048 --quiet --set num_steps=64 --out "$O" >/dev/null 2>&1
torn=0
for i in $(seq 1 20); do
  "$H" train --algo ppo --env CartPole-v1 --steps 50000000 --quiet --set num_steps=64 --log-every 512 --out "$O" --force >"$T/train.log" 2>&1 &
  TP=$!
  # Not .staging/metrics.csv: the last try's may still be there. Before
  # herd installs its handlers, a background job ignores SIGINT.
  for _ in $(seq 1 300); do grep -q training "$T/train.log" && break; sleep 0.05; done
  sleep 0.5
  kill -INT "$TP"
  sleep "0.0$((i % 7))"
  kill -INT "$TP" 2>/dev/null
  wait "$TP"
  { [ -e "$O/.previous" ] || ! timeout 60 "$H" eval --run "$O" --episodes 1 >/dev/null 2>&1; } && torn=$((torn + 1))
done
row "train --force: Ctrl-C, then a second Ctrl-C 0–60 ms later (20 tries)" "$torn torn directories (.previous left or eval failing)" "$(ok $([ "$torn" = 0 ] && echo 1))"
fi

if want hts; then
# herd train under runtime.executor hts, Ctrl-C: one line, no bare "context canceled".
O="$T/hts"
"$H" train --algo ppo --env CartPole-v1 --steps 50000000 --quiet --set runtime.executor=hts --out "$O" >/dev/null 2>"$T/err" &
TP=$!
for _ in $(seq 1 600); do [ -s "$O/.staging/metrics.csv" ] && break; sleep 0.1; done
sleep 1
kill -INT "$TP"; wait "$TP"; rc=$?
bare=$(grep -cx 'context canceled' "$T/err")
row "train, hts executor: Ctrl-C" "exit $rc, $bare bare \"context canceled\" lines" "$(ok $([ "$rc" = 130 ] && [ "$bare" = 0 ] && echo 1))"
fi

if want persist; then
# bench persist, SIGINT and SIGTERM mid-measurement (in the disk pass,
# whose read loop takes minutes).
for sig in INT TERM; do
  "$H" bench persist --modes disk,memory --keys 20000 --value-bytes 512 --reads 10000000 --dir "$T" --progress >/dev/null 2>"$T/err" &
  BP=$!
  for _ in $(seq 1 300); do grep -q push "$T/err" && break; sleep 0.05; done
  sleep 0.3
  t0=$(date +%s.%N)
  kill -"$sig" "$BP"; wait "$BP"; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  row "bench persist, SIG$sig mid-measurement" "exit $rc after $(printf %.2f "$dt") s" "$(ok $([ "$rc" = 130 ] && echo 1))"
done
fi

if want cpuprofile; then
# --cpuprofile on a full disk.
timeout 60 "$H" train --algo ppo --env CartPole-v1 --steps 256 --quiet --set num_steps=64 --out "$T/prof" --cpuprofile /dev/full >/dev/null 2>"$T/err"
rc=$?
row "train --cpuprofile /dev/full (a full disk)" "exit $rc: $(grep -o 'cpu profile[^:]*' "$T/err" | head -1)" "$(ok $([ "$rc" = 1 ] && echo 1))"
fi

if want messages; then
# Messages: an HTTP/1.1 server, a black hole, a timeout of 1ns.
$PY -m http.server 17481 --bind 127.0.0.1 >/dev/null 2>&1 &
HP=$!
$PY -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",17482)); s.listen(); c=[s.accept() for _ in range(4)]; time.sleep(60)' &
BH=$!
sleep 0.5
for c in "HTTP server (python3 -m http.server)|grpc://127.0.0.1:17481/CartPole-v1?timeout=5s|not in HTTP/2" "black hole|grpc://127.0.0.1:17482/CartPole-v1?timeout=2s|timed out" \
  "?timeout=1ns|grpc://127.0.0.1:17482/CartPole-v1?timeout=1ns|timed out"; do
  IFS='|' read -r what id want <<<"$c"
  timeout 60 "$H" train --algo ppo --env "$id" --steps 512 --quiet --out "$T/msg" >/dev/null 2>"$T/err"
  rc=$?
  row "train against a remote env: $what" "exit $rc: $(grep -o '([^()]*)$' "$T/err" | head -1 | cut -c1-90)$(grep -o 'timed out[^(]*' "$T/err" | head -1)" "$(ok $([ "$rc" = 1 ] && grep -q "$want" "$T/err" && ! grep -q 'may require TLS' "$T/err" && echo 1))"
done
kill "$HP" "$BH" 2>/dev/null
fi

if want outage; then
# An external NATS server paused (SIGSTOP) or killed (then restarted on its
# store) under a launch: the lines on stderr during the outage (each kind
# of asynchronous NATS error once a minute per process), the time to the
# first, and the run: it goes on after an outage of 20 s; one past the 30 s
# JetStream failover may end it as failed, one past the 60 s stall bound
# does, saved with the reason.
if nats_server; then
  for ms in STOP:20 KILL:20 STOP:45 STOP:70; do
    mode=${ms%:*} secs=${ms#*:}
    rm -rf "$T/js"
    "$NS" -a 127.0.0.1 -p 14223 -js -sd "$T/js" >/dev/null 2>&1 &
    NPID=$!
    sleep 1
    O="$T/outage$mode$secs"
    setsid "$H" launch --config "$CFG" --steps 50000000 --quiet --out "$O" --nats nats://127.0.0.1:14223 --run outage >/dev/null 2>"$T/err" &
    LPID=$!
    for _ in $(seq 1 600); do [ -s "$O/.staging/metrics.csv" ] && [ "$(wc -l <"$O/.staging/metrics.csv")" -ge 2 ] && break; sleep 0.1; done
    sleep 1
    e0=$(wc -l <"$T/err")
    t0=$(date +%s.%N) first=""
    kill -"$mode" "$NPID"
    for _ in $(seq 1 $((secs * 10))); do
      [ -z "$first" ] && [ "$(grep -c '^nats: ' "$T/err")" -gt 0 ] && first=$(echo "$(date +%s.%N) - $t0" | bc)
      sleep 0.1
    done
    e1=$(wc -l <"$T/err")
    if [ $mode = STOP ]; then kill -CONT "$NPID"; else wait "$NPID" 2>/dev/null; "$NS" -a 127.0.0.1 -p 14223 -js -sd "$T/js" >/dev/null 2>&1 & NPID=$!; fi
    s0=$(tail -1 "$O/.staging/metrics.csv" 2>/dev/null | cut -d, -f1)
    sleep 10
    s1=$(tail -1 "$O/.staging/metrics.csv" 2>/dev/null | cut -d, -f1)
    if [ -n "$s1" ]; then
      kill -INT -- -"$LPID"
      after="$((s1 - s0)) env steps in the 10 s after; Ctrl-C:"
    else after="ended by itself:"; fi
    wait "$LPID"; rc=$?
    st=$(status_of "$O")
    want=$([ "$secs" -lt 30 ] && [ "$rc" = 130 ] && [ -n "$s1" ] && [ $((s1 - s0)) -gt 0 ] && echo 1)
    failed=$([ "$rc" = 1 ] && [ "${st%% *}" = failed ] && echo 1)
    [ "$secs" -ge 30 ] && want=$([ "$failed" = 1 ] || { [ "$rc" = 130 ] && [ -n "$s1" ]; } && echo 1)
    [ "$secs" -ge 60 ] && want=$failed
    row "launch on an external NATS, server $([ $mode = STOP ] && echo paused || echo "killed, restarted after") $secs s" "$((e1 - e0)) stderr lines during the outage, the first after $([ -n "$first" ] && printf %.1f "$first" || echo never) s; $after exit $rc, summary $st" "$(ok $([ $((e1 - e0)) -le 12 ] && [ "$want" = 1 ] && echo 1))"
    kill "$NPID" 2>/dev/null; kill -CONT "$NPID" 2>/dev/null; wait "$NPID" 2>/dev/null
  done
else row "launch on an external NATS, server outage" "skipped: nats-server could not be built" "–"; fi
fi

if want leftovers; then
# Commands that fail before or as they start leave no directory behind
# (no empty runs/, no DIR/db): each runs in an empty folder.
$PY -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",17483)); s.listen(); time.sleep(120)' &
HOLD=$!
sleep 0.3
left="" n=0
for a in "train --algo ppo --env grpc://127.0.0.1:1/CartPole-v1 --steps 1024" "train --algo ppo --env CartPole-v1 --steps 1024 --metrics-addr 127.0.0.1:17483" \
  "train --algo ppo --env CartPole-v1 --steps 1024 --out a/b/c --set bogus=1" "launch --config $PWD/$CFG --steps 1024 --nats nats://127.0.0.1:1" \
  "launch --config $PWD/$CFG --steps 1024 --out q/r --metrics-addr 127.0.0.1:17483" "serve replay --dir st/x --addr 127.0.0.1:17483" \
  "bench persist --dir pp/qq --modes bogus"; do
  E="$T/empty$n"; n=$((n + 1))
  mkdir -p "$E"
  # shellcheck disable=SC2086
  (cd "$E" && timeout 60 "$H" $a >/dev/null 2>&1); rc=$?
  [ "$rc" = 0 ] && left="$left herd ${a%% -*}: exit 0;"
  [ -n "$(ls -A "$E")" ] && left="$left herd ${a%% -*} left $(cd "$E" && find . -mindepth 1 | head -3 | tr '\n' ' ');"
done
kill "$HOLD" 2>/dev/null
row "failed train (remote env unreachable, metrics port taken, bad --set), launch (NATS unreachable, learner's port taken), serve replay (port taken), bench persist (bad mode), each in an empty folder" "$n failed, ${left:-no directory left behind}" "$(ok $([ -z "$left" ] && echo 1))"
fi

if want disk; then
# --- herd train on a full disk ---
tmpfs 4m
if [ -n "$M" ]; then
  "$H" train --algo ppo --env CartPole-v1 --steps 2048 --quiet --set num_steps=64 --out "$M/run" >/dev/null 2>&1
  before=$(sha "$M/run")
  fill "$M"
  "$H" train --algo ppo --env CartPole-v1 --steps 2048 --quiet --set num_steps=64 --out "$M/run" --force >/dev/null 2>"$T/err"
  rc=$?
  after=$(sha "$M/run")
  row "train --force into a full disk" "exit $rc ($(grep -o 'no space left on device' "$T/err" | head -1)); earlier run $([ "$before" = "$after" ] && echo byte-identical || echo CHANGED)" "$(ok $([ "$rc" = 1 ] && [ "$before" = "$after" ] && echo 1))"
else row "train --force into a full disk" "skipped: not root (see go test ./algo -run ForcedRun)" "–"; fi
tmpfs 256k
if [ -n "$M" ]; then
  t0=$(date +%s.%N)
  "$H" train --algo ppo --env CartPole-v1 --steps 50000000 --log-every 128 --quiet --set num_steps=64 --out "$M/run" >/dev/null 2>"$T/err"
  rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  row "train: disk fills while metrics.csv is written" "exit $rc after $(printf %.1f "$dt") s: $(grep -o 'stopped at step [0-9]*' "$T/err" | head -1)" "$(ok $([ "$rc" = 1 ] && grep -q 'stopped at step' "$T/err" && echo 1))"
else row "train: disk fills while metrics.csv is written" "skipped: not root" "–"; fi
fi

if want replaydisk; then
# --- herd serve replay on a full disk ---
PUSH='import sys, grpc
sys.path.insert(0, "python")
from herd_env.replay import ReplayClient
c = ReplayClient(sys.argv[1], timeout=10)
n = 0
try:
    while True:
        c.push([("k%07d" % i, b"x" * 4000, None) for i in range(n, n + 50)])
        n += 50
        if sys.argv[2] == "flush" and n % 1000 == 0:
            c.flush()
except grpc.RpcError as e:
    print(n, e.code().name)'
for dur in sync writeback; do
  tmpfs 8m
  if [ -z "$M" ]; then row "serve replay --durability $dur on a full disk" "skipped: not root (see go test ./replay/persist -run DiskFull)" "–"; continue; fi
  "$H" serve replay --dir "$M/store" --mode disk --durability "$dur" --addr 127.0.0.1:7391 >"$T/srv.log" 2>&1 &
  S=$!
  for _ in $(seq 1 100); do grep -q serving "$T/srv.log" && break; sleep 0.1; done
  res=$(timeout 120 $PY -c "$PUSH" 127.0.0.1:7391 flush)
  kill -INT "$S"
  wait "$S"; rc=$?
  grep -q "panic" "$T/srv.log" && rc="$rc, PANIC"
  t0=$(date +%s.%N)
  timeout 20 "$H" serve replay --dir "$M/store" --mode disk --durability "$dur" --addr 127.0.0.1:7391 >"$T/srv2.log" 2>&1
  rc2=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  row "serve replay --durability $dur, disk fills" "pushes refused after ${res% *} acknowledged records with ${res#* }; Ctrl-C: exit $rc; restart on the full disk: exit $rc2 in $(printf %.1f "$dt") s" \
    "$(ok $([ "${res#* }" = RESOURCE_EXHAUSTED ] && [ "$rc" = 1 ] && [ "$rc2" = 1 ] && echo 1))"
  rm -f "$M/filler"
done
fi

if want invalid; then
# --- subcommands, invalid values, worker counts ---
for a in "bench bogus" "serve bogus" "bench remote bogus" "serve"; do
  # shellcheck disable=SC2086
  timeout 20 "$H" $a >/dev/null 2>&1; rc=$?
  row "herd $a" "exit $rc" "$(ok $([ "$rc" = 1 ] && echo 1))"
done
"$H" serve env --addr 127.0.0.1:0 >"$T/se.log" 2>&1 &
S=$!
for _ in $(seq 1 100); do grep -q serving "$T/se.log" && break; sleep 0.1; done
kill -INT "$S"; wait "$S"; rc=$?
row "serve env, Ctrl-C" "exit $rc" "$(ok $([ "$rc" = 130 ] && echo 1))"
bad=0 total=0
for a in "--set runtime.actors=0" "--set runtime.learners=-1" "--set runtime.policy_workers=0"; do
  total=$((total + 1))
  # shellcheck disable=SC2086
  timeout 20 "$H" train --algo dqn --env CartPole-v1 --quiet --out "$T/x" --set runtime.executor=pal $a >/dev/null 2>&1 && bad=$((bad + 1))
done
for a in "launch --config $CFG --ttl 0s" "launch --config $CFG --ttl -1s" "launch --config $CFG --max-restarts -1" \
  "launch --config $CFG --restart-window -1s" "serve env --addr 127.0.0.1:0 --shm a/b" "serve replay --addr 127.0.0.1:0 --dir $CFG" \
  "serve replay --mode memory --max-batch 0" "serve replay --mode memory --cache-mb 0" "serve env --max-sessions 0" \
  "bench remote replay --ops 0" "worker --role env --slot 0 --nats nats://127.0.0.1:1 --run x --wait -1s"; do
  total=$((total + 1))
  # shellcheck disable=SC2086
  timeout 20 "$H" $a >/dev/null 2>&1; [ $? = 1 ] || bad=$((bad + 1))
done
row "explicit zero or negative values ($total cases)" "$((total - bad)) refused with exit 1, naming the key or flag" "$(ok $([ "$bad" = 0 ] && echo 1))"
for a in "train --algo dqn --env CartPole-v1 --set runtime.executor=pal --set runtime.actors=1000000000" \
  "train --config $CFG --set runtime.env_workers=1000000000" "launch --config $CFG --set runtime.env_workers=1000000"; do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout 60 "$H" $a --quiet --out "$T/y" >/dev/null 2>"$T/err"; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  row "herd $a" "exit $rc in $(printf %.2f "$dt") s: $(grep -o 'runtime[.a-z_]* [0-9]*[^;]*' "$T/err" | head -1)" "$(ok $([ "$rc" = 1 ] && echo 1))"
done
t0=$(date +%s.%N)
timeout 60 "$H" bench env --envs CartPole-v1 --num-envs 1000000000 >/dev/null 2>"$T/err"; rc=$?
dt=$(echo "$(date +%s.%N) - $t0" | bc)
row "herd bench env --num-envs 1000000000" "exit $rc in $(printf %.2f "$dt") s: $(grep -o 'needs about [^,;]*' "$T/err" | head -1)" "$(ok $([ "$rc" = 1 ] && grep -q 'num-envs' "$T/err" && echo 1))"
fi

if want controller; then
# The --no-workers controller (the compose/Kubernetes layout) over an
# external NATS server, its workers started here: no learner at all, a
# Ctrl-C of the controller, and a learner killed (kill -9) and restarted at
# once, as compose's restart: on-failure does. Each row: the controller's
# exit status and how long after the fault it noticed, the learner's, the
# summary, and the run's dist counters (duplicates, dropped, discarded).
if nats_server; then
  "$NS" -a 127.0.0.1 -p 14223 -js -sd "$T/jsc" >/dev/null 2>&1 &
  NPID=$!
  sleep 1
  U=nats://127.0.0.1:14223
  # ctl RUN [FLAGS…]: starts the controller in its own session as CPID.
  ctl() { local r=$1; shift; setsid "$H" launch --config "$CFG" --steps 5000000 --quiet --nats "$U" --run "$r" --no-workers --ttl 3s "$@" >"$T/ctl-$r.log" 2>&1 & CPID=$!; sleep 1; }
  # wk RUN ROLE [FLAGS…]: starts a worker (in the background) as WPID.
  wk() { local r=$1 role=$2; shift 2; setsid "$H" worker --role "$role" --nats "$U" --run "$r" --ttl 3s "$@" >>"$T/wk-$r-$role.log" 2>&1 & WPID=$!; WK+=("$WPID"); }
  WK=()
  # rows_of OUT: the learner's first metrics row (the run is under way).
  rows_of() { for _ in $(seq 1 600); do [ -s "$1/.staging/metrics.csv" ] && [ "$(wc -l <"$1/.staging/metrics.csv")" -ge 2 ] && return 0; sleep 0.1; done; return 1; }
  dist_of() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])).get("dist",{}); print("duplicates %d, dropped %d, discarded %d" % (d.get("dist/duplicates",0), d.get("dist/dropped",0), d.get("dist/discarded",0)))' "$1/summary.json" 2>/dev/null || echo "no counters"; }

  t0=$(date +%s.%N)
  ctl c-none --register-timeout 5s
  wait "$CPID"; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  row "launch --no-workers: no learner ever starts (\`--register-timeout 5s\`)" "controller exit $rc after $(printf %.1f "$dt") s: $(grep -o 'no learner registered within [^,]*' "$T/ctl-c-none.log" | head -1)" "$(ok $([ "$rc" = 1 ] && echo 1))"

  O="$T/c-int"
  ctl c-int
  wk c-int policy; wk c-int env --slot 0; wk c-int env --slot 1; wk c-int learner --out "$O" --quiet; L=$WPID
  if rows_of "$O"; then
    kill -INT -- -"$CPID"; t0=$(date +%s.%N)
    wait "$CPID"; rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    wait "$L"; lrc=$?
    st=$(status_of "$O")
    row "launch --no-workers: Ctrl-C of the controller" "controller exit $rc $(printf %.1f "$dt") s later, learner exit $lrc; summary $st; $(dist_of "$O")" "$(ok $([ "$rc" = 130 ] && [ "$lrc" = 130 ] && [ "$st" = interrupted ] && echo 1))"
  else row "launch --no-workers: Ctrl-C of the controller" "learner never wrote a row: $(tail -1 "$T/wk-c-int-learner.log")" "**no**"; fi
  kill -9 -- -"$CPID" 2>/dev/null

  O="$T/c-restart"
  ctl c-restart
  wk c-restart policy; wk c-restart env --slot 0; wk c-restart env --slot 1; wk c-restart learner --out "$O" --quiet; L=$WPID
  if rows_of "$O"; then
    kill -9 "$L"; t0=$(date +%s.%N)
    wait "$L" 2>/dev/null
    setsid "$H" worker --role learner --nats "$U" --run c-restart --ttl 3s --out "$O" >"$T/restart.log" 2>&1 & L2=$!
    for _ in $(seq 1 600); do grep -q "resuming from step" "$T/restart.log" && break; sleep 0.05; done
    dt1=$(echo "$(date +%s.%N) - $t0" | bc)
    resumed=$(grep -o 'resuming from step [0-9]*' "$T/restart.log" | head -1)
    sleep 2
    kill -INT -- -"$CPID"
    wait "$CPID"; rc=$?
    wait "$L2"; lrc=$?
    st=$(status_of "$O")
    row "launch --no-workers: kill -9 of the learner, restarted at once (compose's restart: on-failure)" "restarted learner: \"$resumed\" $(printf %.1f "$dt1") s after the kill; then Ctrl-C of the controller: controller exit $rc, learner exit $lrc, summary $st; $(dist_of "$O")" "$(ok $([ -n "$resumed" ] && [ "$rc" = 130 ] && [ "$lrc" = 130 ] && [ "$st" = interrupted ] && echo 1))"
  else row "launch --no-workers: kill -9 of the learner, restarted" "learner never wrote a row" "**no**"; kill -9 -- -"$CPID" 2>/dev/null; fi
  for p in "${WK[@]}"; do kill "$p" 2>/dev/null; done
  kill "$NPID"; wait "$NPID" 2>/dev/null
else row "launch --no-workers rows" "skipped: nats-server could not be built" "–"; fi
fi

# An external NATS server that requires mutual TLS (certificates made here
# with openssl): a run with --nats-tls-ca/-cert/-key completes; a client
# with another CA, or without a certificate, is refused at once, naming
# the cause; no process's argv and no file of the run holds key material.
if want tls; then
if nats_server && command -v openssl >/dev/null; then
  C="$T/certs"; mkdir -p "$C"
  mkcert() { # NAME CA: a key and a certificate for 127.0.0.1 signed by CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$C/$1.key" -subj "/CN=$1" -out "$C/$1.csr" 2>/dev/null &&
      openssl x509 -req -in "$C/$1.csr" -CA "$C/$2.pem" -CAkey "$C/$2.key" -CAcreateserial -days 1 \
        -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n') -out "$C/$1.pem" 2>/dev/null
  }
  for ca in ca other; do
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$C/$ca.key" -subj "/CN=$ca" -days 1 -out "$C/$ca.pem" 2>/dev/null
  done
  mkcert server ca; mkcert worker ca; mkcert stranger other
  "$NS" -a 127.0.0.1 -p 14224 -js -sd "$T/jst" --tlsverify --tlscert "$C/server.pem" --tlskey "$C/server.key" --tlscacert "$C/ca.pem" >/dev/null 2>&1 &
  NPID=$!
  sleep 1
  U=tls://127.0.0.1:14224
  O="$T/tls-ok"
  t0=$(date +%s.%N)
  "$H" launch --config "$CFG" --steps 100000 --quiet --out "$O" --nats "$U" --run tls-ok \
    --nats-tls-ca "$C/ca.pem" --nats-tls-cert "$C/worker.pem" --nats-tls-key "$C/worker.key" >"$T/tls-ok.log" 2>&1 &
  LP=$!
  mkdir -p "$T/argv"
  while kill -0 $LP 2>/dev/null; do # every process's argv, once
    for p in $LP $(pgrep -P $LP); do [ -e "$T/argv/$p" ] || tr '\0' ' ' <"/proc/$p/cmdline" >"$T/argv/$p" 2>/dev/null; done
    sleep 0.05
  done
  wait $LP; rc=$?
  dt=$(echo "$(date +%s.%N) - $t0" | bc)
  keyb=$(sed -n 2p "$C/worker.key" | cut -c1-40)
  leaks=$(grep -rlF -e "$keyb" -e "PRIVATE KEY" "$O" "$T/tls-ok.log" "$T/argv" 2>/dev/null | wc -l)
  row "launch on an external NATS that requires mutual TLS, with \`--nats-tls-ca/-cert/-key\` (100 000 steps)" "exit $rc after $(printf %.1f "$dt") s, summary $(status_of "$O"); $(grep -l 'nats-tls-key' "$T"/argv/* | wc -l) of $(find "$T/argv" -type f -size +0 | wc -l) processes given the key's path; files and argvs holding key material: $leaks" "$(ok $([ "$rc" = 0 ] && [ "$leaks" = 0 ] && echo 1))"
  for c in "another CA|--nats-tls-ca $C/other.pem --nats-tls-cert $C/worker.pem --nats-tls-key $C/worker.key" \
    "no client certificate|--nats-tls-ca $C/ca.pem" \
    "a client certificate of another CA|--nats-tls-ca $C/ca.pem --nats-tls-cert $C/stranger.pem --nats-tls-key $C/stranger.key"; do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 60 "$H" launch --config "$CFG" --steps 20480 --quiet --out "$T/tls-bad" --nats "$U" --run tls-bad ${c#*|} >"$T/tls-bad.log" 2>&1; rc=$?
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    row "launch on that server with ${c%%|*}" "exit $rc after $(printf %.1f "$dt") s: \"$(grep -o 'tls[^"]*' "$T/tls-bad.log" | head -1 | cut -c1-90)\"; run dir left: $([ -e "$T/tls-bad" ] && echo yes || echo no)" "$(ok $([ "$rc" = 1 ] && [ ! -e "$T/tls-bad" ] && echo 1))"
  done
  kill "$NPID"; wait "$NPID" 2>/dev/null
else row "launch on an external NATS with TLS" "skipped: nats-server or openssl missing" "–"; fi
fi
