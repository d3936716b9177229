#!/usr/bin/env bash
# herd vs CleanRL on CartPole-v1, 500k steps: CleanRL's ppo.py and dqn.py
# with their defaults against `herd train` with configs/ppo-cartpole.yaml and
# configs/dqn-cartpole.yaml (the same settings), alternating in one run,
# quiet and under two busy loops (docs/BENCHMARKS.md, "Training speed").
#
#   scripts/cleanrl-ratio.sh CLEANRL_DIR GYMNASIUM_DIR [HERD_BIN]
#
# CLEANRL_DIR: a CleanRL source tree (cleanrl/ppo.py, cleanrl/dqn.py,
# cleanrl_utils/); GYMNASIUM_DIR: Gymnasium 0.29.1's source tree (the folder
# holding gymnasium/). Neither is part of herd; fetch them yourself, e.g.
#   git clone https://github.com/vwxyzjn/cleanrl
#   git clone -b v0.29.1 https://github.com/Farama-Foundation/Gymnasium
# HERD_BIN: a herd binary (default: built here from the working tree).
#
# Python: Debian's /usr/bin/python3 with python3-torch, python3-numpy,
# python3-cloudpickle and python3-typing-extensions. PyTorch runs on the CPU
# with one thread (OMP_NUM_THREADS=1, MKL_NUM_THREADS=1), as CleanRL runs
# these scripts on a machine without a GPU. CleanRL imports tyro and
# torch.utils.tensorboard (TensorBoard); the launcher written below replaces
# both with stand-ins: tyro.cli builds the script's Args from its defaults
# and the --flag value pairs given, and SummaryWriter records nothing. They
# change nothing the training computes; CleanRL then skips writing its event
# files, which only makes its times shorter. Its episode prints go to
# /dev/null.
#
# Times are process wall times (start to exit, imports and herd's output
# files included) from date +%s.%N, with each process's CPU seconds (user +
# sys, /usr/bin/time) beside them: on a loaded machine the wall times
# mostly measure the load, and the CPU ratio is the one to read. herd's
# own summary.json wall_seconds (the training loop alone) is printed too.
#
# Environment: REPS (default 2), SKIP_QUIET=1 or SKIP_LOAD=1 to run one part,
# STEPS (default 500000; smaller for a smoke test).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
CLEANRL=$(cd "$1" && pwd)
GYM=$(cd "$2" && pwd)
HERD=${3:-}
REPS=${REPS:-2}
STEPS=${STEPS:-500000}
PY=/usr/bin/python3
for f in "$CLEANRL/cleanrl/ppo.py" "$CLEANRL/cleanrl/dqn.py" "$CLEANRL/cleanrl_utils/buffers.py" "$GYM/gymnasium/__init__.py"; do
  [ -f "$f" ] || { echo "cleanrl-ratio: missing $f" >&2; exit 2; }
done
grep -q "__version__ = \"0.29.1\"" "$GYM/gymnasium/__init__.py" ||
  echo "cleanrl-ratio: warning: $GYM is not Gymnasium 0.29.1" >&2
"$PY" -c 'import torch, numpy, cloudpickle, typing_extensions' ||
  { echo "cleanrl-ratio: $PY lacks torch, numpy, cloudpickle or typing_extensions" >&2; exit 2; }

cd "$(dirname "$0")/.."
T=$(mktemp -d)
LOOPS=()
cleanup() {
  local q
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # through the EXIT trap

if [ -z "$HERD" ]; then
  go build -o "$T/herd" ./cmd/herd
  HERD=$T/herd
fi
HERD=$(realpath "$HERD")
CFG=$(pwd)/configs

cat >"$T/launch.py" <<'EOF'
"""Runs a CleanRL script with stand-ins for tyro and torch.utils.tensorboard."""
import dataclasses
import runpy
import sys
import types


def cli(cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kw, argv = {}, sys.argv[1:]
    for flag, value in zip(argv[::2], argv[1::2]):
        name = flag.lstrip("-").replace("-", "_")
        if name not in fields or len(argv) % 2:
            raise SystemExit(f"stand-in tyro: cannot parse {argv}")
        kind = type(fields[name].default)
        kw[name] = value.lower() in ("1", "true") if kind is bool else kind(value)
    return cls(**kw)


class SummaryWriter:
    def __init__(self, *args, **kwargs):
        pass

    def add_text(self, *args, **kwargs):
        pass

    def add_scalar(self, *args, **kwargs):
        pass

    def close(self):
        pass


sys.modules["tyro"] = types.SimpleNamespace(cli=cli)
tb = types.ModuleType("torch.utils.tensorboard")
tb.SummaryWriter = SummaryWriter
sys.modules["torch.utils.tensorboard"] = tb
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); herd $(git rev-parse --short HEAD) ($HERD); CleanRL $(git -C "$CLEANRL" rev-parse --short HEAD 2>/dev/null || echo '(not a git tree)')"
echo "$(grep -m1 'model name' /proc/cpuinfo); $(nproc) CPUs; torch $("$PY" -c 'import torch; print(torch.__version__)')"

now() { date +%s.%N; }

# cpu FILE: the user + sys seconds /usr/bin/time wrote to FILE.
cpu() { tail -1 "$1" | awk '{printf "%.2f", $1 + $2}'; }

# cleanrl SCRIPT: one CleanRL run, prints wall seconds/CPU seconds.
cleanrl() {
  local t0 d="$T/cleanrl"
  rm -rf "$d" && mkdir -p "$d"
  t0=$(now)
  (cd "$d" && OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH="$GYM:$CLEANRL" \
    /usr/bin/time -o "$T/cpu" -f '%U %S' "$PY" "$T/launch.py" "$CLEANRL/cleanrl/$1.py" --total-timesteps "$STEPS" >/dev/null)
  awk -v a="$t0" -v b="$(now)" -v c="$(cpu "$T/cpu")" 'BEGIN{printf "%.2f/%.2f", b-a, c}'
}

# herd CONFIG: one herd run, prints wall seconds/CPU seconds/summary wall
# seconds.
herd() {
  local t0 out="$T/herd-run"
  rm -rf "$out"
  t0=$(now)
  /usr/bin/time -o "$T/cpu" -f '%U %S' "$HERD" train --config "$CFG/$1.yaml" --steps "$STEPS" --quiet --out "$out" >/dev/null
  awk -v a="$t0" -v b="$(now)" -v c="$(cpu "$T/cpu")" -v w="$(jq -r .wall_seconds "$out/summary.json")" \
    'BEGIN{printf "%.2f/%.2f/%.2f", b-a, c, w}'
}

busy() { # start N shell busy loops (not pinned)
  for _ in $(seq "$1"); do sh -c 'while :; do :; done' & LOOPS+=($!); done
  sleep 0.2
}
unbusy() {
  local q
  for q in "${LOOPS[@]}"; do kill "$q" 2>/dev/null || true; done
  for q in "${LOOPS[@]}"; do wait "$q" 2>/dev/null || true; done
  LOOPS=()
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# round LABEL: REPS rounds of ppo.py, herd PPO, dqn.py, herd DQN, then the
# medians and ratios (CleanRL / herd: process wall times, then CPU seconds).
round() {
  local algo c h mc mh cc ch
  echo
  echo "== $1 ($REPS rounds, alternating; load at start: $(cut -d' ' -f1-3 /proc/loadavg))"
  declare -A C H
  for _ in $(seq "$REPS"); do
    for algo in ppo dqn; do
      c=$(cleanrl "$algo"); C[$algo]="${C[$algo]:-} $c"
      h=$(herd "$algo-cartpole"); H[$algo]="${H[$algo]:-} $h"
      echo "   $algo: CleanRL $c s (wall/CPU), herd $h s (wall/CPU/training loop), load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  for algo in ppo dqn; do
    mc=$(printf '%s\n' ${C[$algo]} | cut -d/ -f1 | median)
    mh=$(printf '%s\n' ${H[$algo]} | cut -d/ -f1 | median)
    cc=$(printf '%s\n' ${C[$algo]} | cut -d/ -f2 | median)
    ch=$(printf '%s\n' ${H[$algo]} | cut -d/ -f2 | median)
    echo "$algo: wall medians CleanRL $mc s, herd $mh s: $(awk -v x="$mc" -v y="$mh" 'BEGIN{printf "%.1f", x/y}')x;" \
      "CPU medians CleanRL $cc s, herd $ch s: $(awk -v x="$cc" -v y="$ch" 'BEGIN{printf "%.1f", x/y}')x"
  done
  echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

if [ "${SKIP_QUIET:-}" != 1 ]; then
  round "quiet"
fi
if [ "${SKIP_LOAD:-}" != 1 ]; then
  busy 2
  round "two busy loops"
  unbusy
fi
