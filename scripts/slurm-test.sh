#!/usr/bin/env bash
# Runs deploy/slurm/herd.sbatch on a real Slurm: sets up a single-host
# cluster in a temporary directory (Debian's munged, slurmctld and slurmd,
# started by hand as daemons: no systemd needed; proctrack/linuxproc, no
# cgroups; its own munge key, ports and state), submits a PPO CartPole run
# per row, waits for it and checks its exit and outputs, then stops the
# daemons it started and removes the directory.
#
#   scripts/slurm-test.sh                 # every row
#   scripts/slurm-test.sh none cancel-env # some rows
#   HERD=/path/herd NATS_SERVER=/path/nats-server STEPS=300000 KEEP=DIR scripts/slurm-test.sh
#
# Rows (the fault 4 s after the learner's first metrics row):
#   none            the run completes: job COMPLETED, exit 0, summary completed;
#                   the NATS password is in no process's argv, in neither
#                   the job's output nor the run directory
#   cancel-env      scancel JOB.STEP of env worker 0: the sbatch script
#                   starts the step again and the run completes (exit 0)
#   cancel-learner  scancel JOB.STEP of the learner (SIGKILL): the sbatch
#                   script starts it again, it resumes from its newest
#                   checkpoint and the run completes (exit 0)
#   term-learner    scancel --signal=TERM JOB.STEP of the learner: it saves
#                   the run as interrupted, the job FAILED, exit 130
#   cancel-job      scancel JOB: every step gets SIGTERM, the learner saves
#                   the run (summary interrupted), the job CANCELLED, no
#                   worker step started again
# Each row prints: the fault, the job's state and exit code, the run's
# status and steps, dist duplicates, and the seconds from the fault to the
# job's end.
#
# Needs root (slurmd starts job steps as their user). Installs slurmctld,
# slurmd, munge and slurm-client with apt-get when they are missing, and
# skips (exit 0, with the reason) only when they cannot be installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(none cancel-env cancel-learner term-learner cancel-job)
steps=${STEPS:-300000}

skip() { echo "slurm-test: SKIP: $*"; exit 0; }
need=(slurmctld slurmd munge slurm-client)
missing=()
for p in "${need[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    skip "${missing[*]} not installed, and apt-get is not available to this user"
  fi
  echo "slurm-test: installing ${missing[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null 2>&1 \
    || skip "apt-get could not install ${missing[*]}"
fi
[ "$(id -u)" -eq 0 ] || { echo "slurm-test: needs root (slurmd runs job steps as their user)" >&2; exit 1; }

dir=$(mktemp -d /tmp/herd-slurm-test.XXXXXX)
chmod 755 "$dir"
started=() # pid files of the daemons started here
cleanup() {
  local f p pids=()
  for f in "${started[@]}"; do
    p=$(cat "$f" 2>/dev/null || true)
    [ -n "$p" ] && kill "$p" 2>/dev/null && pids+=("$p")
  done
  # A slurmd that never reached its controller may ignore SIGTERM.
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do
      # A zombie (state Z) has exited; its parent may never reap it.
      [ -r "/proc/$p/stat" ] && [[ $(cat "/proc/$p/stat" 2>/dev/null) != *") Z "* ]] && alive=1
    done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp -r "$dir/jobs" "$dir/log" "$KEEP/" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

bin=$dir/bin
mkdir -p "$bin" "$dir/jobs" "$dir/log" "$dir/state" "$dir/spool" "$dir/munge" "$dir/tmp"
herd=${HERD:-}
if [ -z "$herd" ]; then herd=$bin/herd; CGO_ENABLED=0 go build -o "$herd" ./cmd/herd; fi
nats=${NATS_SERVER:-}
if [ -z "$nats" ]; then nats=$bin/nats-server; CGO_ENABLED=0 go build -o "$nats" github.com/nats-io/nats-server/v2; fi

# munge: a key of this cluster's own, the socket in $dir (slurm.conf's
# AuthInfo points Slurm at it).
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 700 "$dir/munge" && chmod 400 "$dir/munge/munge.key"
/usr/sbin/munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
started+=("$dir/munge/munged.pid")

# Free ports for slurmctld and slurmd: none listening, below the
# ephemeral range (a connection's local port there can take one too).
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    if command -v ss >/dev/null 2>&1; then
      ss -Htan "sport = :$p" | grep -q . || { echo "$p"; return; }
    else
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    fi
  done
}
host=$(hostname -s)
ctld_port=$(free_port)
cat >"$dir/slurm.conf" <<EOF
ClusterName=herdtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$(p=$(free_port); while [ "$p" = "$ctld_port" ]; do p=$(free_port); done; echo "$p")
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=10
# The node offers more CPUs than this machine has, so that the topology's
# one task per process fits on 2 cores (the processes share them).
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=herd Nodes=$host Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
/usr/sbin/slurmctld -f "$SLURM_CONF" -i
started+=("$dir/slurmctld.pid")
/usr/sbin/slurmd -f "$SLURM_CONF"
started+=("$dir/slurmd.pid")
node_state() { timeout 5 sinfo -h -o %t 2>/dev/null || true; }
for _ in $(seq 50); do
  [ "$(node_state)" = idle ] && break
  kill -0 "$(cat "$dir/slurmctld.pid" 2>/dev/null || echo none)" 2>/dev/null || break
  sleep 0.2
done
if [ "$(node_state)" != idle ]; then
  echo "slurm-test: the node did not come up: $(timeout 5 sinfo -h -o '%t %E' 2>&1)" >&2
  tail -20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2
  exit 1
fi
echo "slurm-test: single-host Slurm $(sinfo -V | cut -d' ' -f2) up on $host ($dir)"

# state JOB KEY: a field of `scontrol show job` (kept MinJobAge after the end).
state() { { scontrol show job "$1" 2>/dev/null || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
# stepid JOB NAME: the step ID of a running step (empty when none).
stepid() { { squeue -h --steps -j "$1" -o '%i %j' 2>/dev/null || true; } | awk -v n="$2" '$2 == n {print $1; exit}'; }
json() { { grep -o "\"$2\": *[^,}]*" "$1" 2>/dev/null || true; } | head -1 | sed 's/^[^:]*: *//; s/"//g'; }

fail=0
bad() { echo "slurm-test: $row: $*" >&2; fail=1; }
printf '%-15s %-10s %-6s %-12s %-8s %-5s %s\n' row job exit run steps dup 'fault → end (s)'
for row in "${rows[@]}"; do
  case $row in none | cancel-env | cancel-learner | term-learner | cancel-job) ;; *)
    echo "slurm-test: unknown row $row" >&2; exit 2 ;;
  esac
  jd=$dir/jobs/$row
  mkdir -p "$jd"
  out=$jd/run
  n=$steps
  [ "$row" = none ] && n=$((steps / 3))
  job=$(sbatch --parsable --chdir="$root" --time=10 --output="$jd/job.out" \
    --export=ALL,TMPDIR="$dir/tmp",HERD="$herd",NATS_SERVER="$nats",HERD_STEPS="$n",HERD_OUT="$out",HERD_RUN="slurm-$row" \
    deploy/slurm/herd.sbatch)
  # The fault once the learner has written its first metrics rows.
  t0=
  if [ "$row" != none ]; then
    for _ in $(seq 300); do
      # The learner writes the run in out/.staging until it ends.
      [ "$(cat "$out/.staging/metrics.csv" "$out/metrics.csv" 2>/dev/null | wc -l)" -ge 2 ] && break
      sleep 0.2
    done
    sleep 4
    case $row in
      cancel-env) target=$(stepid "$job" env-0); sig=() ;;
      cancel-learner) target=$(stepid "$job" learner-0); sig=() ;;
      term-learner) target=$(stepid "$job" learner-0); sig=(--signal=TERM) ;;
      cancel-job) target=$job; sig=() ;;
    esac
    if [ -z "$target" ]; then
      echo "slurm-test: $row: no step to cancel: $(squeue -h --steps -j "$job" -o '%i %j' | tr '\n' ' ')" >&2
      fail=1
    else
      scancel "${sig[@]}" "$target" || fail=1
    fi
    t0=$(date +%s.%N)
  elif [ -z "$(stepid "$job" learner-0)" ]; then
    for _ in $(seq 100); do [ -n "$(stepid "$job" learner-0)" ] && break; sleep 0.1; done
  fi
  if [ "$row" = none ]; then
    # While it runs: the password is in no process's command line.
    conf=$(ls "$dir"/tmp/herd-slurm-"$job".*/nats.conf 2>/dev/null | head -1 || true)
    pw=$(sed -n 's/.*password: "\([^"]*\)".*/\1/p' "$conf" 2>/dev/null || true)
    [ -n "$pw" ] || bad "no NATS config with a password in the job's private directory"
    for c in /proc/[0-9]*/cmdline; do
      args=$({ tr '\0' ' ' <"$c"; } 2>/dev/null || true)
      if [ -n "$pw" ] && [[ $args == *"$pw"* ]]; then bad "the NATS password is on a command line: ${args%% *}"; fi
    done
  fi
  for _ in $(seq 1500); do
    case $(state "$job" JobState) in PENDING | RUNNING | COMPLETING | "") sleep 0.2 ;; *) break ;; esac
  done
  t1=$(date +%s.%N)
  js=$(state "$job" JobState) ec=$(state "$job" ExitCode)
  st=$(json "$out/summary.json" status) ns=$(json "$out/summary.json" steps) dup=$(json "$out/summary.json" dist/duplicates)
  took=-
  [ -n "$t0" ] && took=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  printf '%-15s %-10s %-6s %-12s %-8s %-5s %s\n' "$row" "$js" "$ec" "${st:-none}" "${ns:--}" "${dup:--}" "$took"
  o=$jd/job.out
  case $row in
    none | cancel-env)
      [ "$js/$ec" = COMPLETED/0:0 ] || bad "job $js, exit $ec, want COMPLETED, 0:0"
      [ "$st" = completed ] || bad "summary status ${st:-none}, want completed"
      [ "${dup:-x}" = 0 ] || bad "duplicates ${dup:-none}, want 0"
      [ "$ns" -ge $((n - 2048)) ] 2>/dev/null || bad "steps ${ns:-none} of $n"
      ;;&
    cancel-env)
      grep -q "step env-0 ended with exit" "$o" || bad "no restart of env-0 in the job's output" ;;
    cancel-learner)
      [ "$js/$ec" = COMPLETED/0:0 ] || bad "job $js, exit $ec, want COMPLETED, 0:0"
      [ "$st" = completed ] || bad "summary status ${st:-none}, want completed"
      grep -q "resuming from step" "$o" || bad "the job's output does not show the learner resuming" ;;
    term-learner)
      [ "$js/$ec" = FAILED/130:0 ] || bad "job $js, exit $ec, want FAILED, 130:0"
      [ "$st" = interrupted ] || bad "summary status ${st:-none}, want interrupted" ;;
    cancel-job)
      [ "$js" = CANCELLED ] || bad "job $js, want CANCELLED"
      [ "$st" = interrupted ] || bad "summary status ${st:-none}, want interrupted"
      grep -q "starting it again" "$o" && bad "a worker step was started again while the job was cancelled" ;;
  esac
  if [ "$row" = none ] && [ -n "${pw:-}" ]; then
    grep -rqF "$pw" "$out" "$o" && bad "the NATS password is in the run directory or the job's output"
    [ -n "$(find "$dir/tmp" -name nats.conf 2>/dev/null)" ] && bad "the job's private directory was left behind"
  fi
  # Nothing of the job is left running (its processes name the run ID).
  for c in /proc/[0-9]*/cmdline; do
    args=$({ tr '\0' ' ' <"$c"; } 2>/dev/null || true)
    [[ $args == *"--run slurm-$row "* ]] && bad "a process is left: $args"
  done
  if [ "$fail" -ne 0 ]; then echo "--- $o"; cat "$o"; fi
done
exit "$fail"
