#!/usr/bin/env bash
# Reruns every table of docs/BENCHMARKS.md, one section per README claim.
#
#   scripts/bench-all.sh            every section (hours on 2 cores)
#   scripts/bench-all.sh --list     the section names
#   scripts/bench-all.sh NAME...    only those sections
#
# Output goes to $OUT (default bench-out/<UTC time>/), one file per section,
# each headed by the date, commit, machine and load average, so that
# docs/BENCHMARKS.md can be rewritten from it. Run it on a quiet machine;
# the load average is recorded either way. PYTHON names the Python with
# grpcio and protobuf (default python3). MINATAR_DIR names a directory
# holding MinAtar's `minatar` package (section minatar; without it only
# herd's side runs).
set -euo pipefail
cd "$(dirname "$0")/.."

SECTIONS=(cold speed learn shared nn env replay persist hts pal remote dist minatar layout resume)
if [ "${1:-}" = "--list" ]; then printf '%s\n' "${SECTIONS[@]}"; exit 0; fi
WANT=("$@")
[ ${#WANT[@]} -eq 0 ] && WANT=("${SECTIONS[@]}")
for w in "${WANT[@]}"; do
  [[ " ${SECTIONS[*]} " == *" $w "* ]] || { echo "unknown section $w (--list names them)" >&2; exit 2; }
done

OUT=${OUT:-bench-out/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
B="$OUT/herd"
go build -o "$B" ./cmd/herd
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

header() {
  echo "# $1"
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3)"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg)"
}
run() { echo "\$ $*"; "$@"; echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; }
timed() { /usr/bin/time -f "wall %e s, user %U s, sys %S s" "$@"; }

sec_cold() { # First run: cold build
  local d="$TMP/cold"
  mkdir -p "$d"
  local s=$SECONDS
  run env GOMODCACHE="$d/m" GOCACHE="$d/c" GOFLAGS=-modcacherw go run ./cmd/herd train \
    --config configs/ppo-cartpole.yaml --out "$d/run" --quiet
  echo "wall $((SECONDS - s)) s"
  echo "modules downloaded: $(find "$d/m/cache/download" -name '*.zip' | wc -l)"
  echo "modules in the build: $(go list -deps -f '{{with .Module}}{{.Path}}{{end}}' ./cmd/herd | sort -u | grep -vc '^herd$')"
  chmod -R u+w "$d"
}
sec_speed() { # Training speed
  SKIP_LOAD=1 REPS=5 run bash scripts/bench-shared-cores.sh
  for c in sac-pendulum td3-pendulum ddpg-pendulum; do
    run timed "$B" train --config "configs/$c.yaml" --quiet --out "$TMP/speed-$c"
  done
}
sec_learn() { # Learning, 5 seeds each
  run "$B" bench learn --config configs/ppo-cartpole.yaml --config configs/a2c-cartpole.yaml \
    --config configs/dqn-cartpole.yaml --config configs/dqn-cartpole-zoo.yaml --seeds 1-5 --md "$OUT/learn-cartpole.md"
  run "$B" bench learn --config configs/sac-pendulum.yaml --config configs/td3-pendulum.yaml \
    --config configs/ddpg-pendulum.yaml --seeds 1-5 --eval-episodes 100 --target -200 --md "$OUT/learn-pendulum.md"
  run "$B" bench learn --config configs/ppo-acrobot.yaml --seeds 1-5 --md "$OUT/learn-acrobot.md"
  run "$B" bench learn --config configs/ppo-lunarlander.yaml --seeds 1-5 --eval-episodes 10 --md "$OUT/learn-lunarlander.md"
  run "$B" bench learn --config configs/td3-mountaincarcontinuous.yaml --seeds 1-5 --eval-episodes 100 --target 90 --md "$OUT/learn-mcc.md"
}
sec_shared() { # Shared cores: two busy loops, all cores vs pinned
  run "$B" bench learn --config configs/dqn-cartpole.yaml --steps 100000 --seeds 1,1,1,1,1 --load 2 --pin all --pin 0
  run "$B" bench learn --config configs/ppo-cartpole.yaml --steps 100000 --seeds 1,1,1,1,1 --load 2 --pin all --pin 0
  run "$B" bench learn --config configs/sac-pendulum.yaml --steps 20000 --seeds 1,1,1 --load 2 --pin all --pin 0
}
sec_nn() { # nn, one core
  GOMAXPROCS=1 run "$B" bench nn --nets 64-64 --batches 1,256 --min-time 3ms --repeats 61 --json
}
sec_env() { # Environments
  for i in 1 2 3; do run "$B" bench env --scaling --envs CartPole-v1,Acrobot-v1,LunarLander-v3 --num-envs 64; done
  run "$B" bench env --scaling --envs CartPole-v1 --num-envs 1024
  GOMAXPROCS=1 run "$B" bench env
}
sec_replay() { # Replay: sum tree and buffers
  run "$B" bench replay --ops tree_set --capacity 1048576 --fanout 16 --seconds 10 --stat min
  for k in 8 16; do
    run "$B" bench replay --ops tree_set,tree_sample --capacity 1048576 --fanout $k --seconds 6 --stat min
  done
  for i in 1 2 3; do run "$B" bench replay --ops mixed --threads 2,3,4 --seconds 4; done
  for r in 1 8; do run "$B" bench replay --ops mixed --threads 3,4 --seconds 4 --ratio $r; done
  run "$B" bench replay --ops tree_set,tree_sample,insert,sample,update --capacity 1048576 --seconds 3
}
sec_persist() { # Persistent store
  for i in 1 2 3 4 5; do run "$B" bench persist --modes hybrid --value-bytes 1024 --keys 100000 --dir "$TMP"; done
  run "$B" bench persist --modes disk,hybrid --value-bytes 1024 --keys 2000 --dir "$TMP"
  run "$B" bench persist --modes disk,hybrid --value-bytes 1024 --keys 2000 --sync --dir "$TMP"
  run "$B" bench persist --snapshot --dir "$TMP"
}
sec_hts() { # HTS: speed, Claim 1, learning, determinism
  run "$B" bench hts --config configs/ppo-cartpole-hts-vt.yaml --cvs 0.5,1,2,3 --segments 8 --dist lognormal
  run "$B" bench hts --config configs/ppo-cartpole-hts-vt.yaml --cvs 0.5,1,2,3 --segments 8 --dist gamma
  run "$B" bench hts --config configs/ppo-cartpole-hts-vt.yaml --cvs 0.5,1,2,3 --segments 8 --dist lognormal --tail-prob 0.02 --tail-factor 10
  run "$B" bench learn --config configs/ppo-cartpole-hts.yaml --seeds 1-5 --md "$OUT/hts-ppo.md"
  run "$B" bench learn --config configs/a2c-cartpole-hts.yaml --seeds 1-5 --md "$OUT/hts-a2c.md"
  run bash scripts/hts-determinism.sh
}
sec_pal() { # PAL
  run "$B" bench learn --config configs/dqn-cartpole-pal.yaml --seeds 1-5
  run "$B" bench learn --config configs/td3-pendulum-pal.yaml --config configs/sac-pendulum-pal.yaml --seeds 1-5 --eval-episodes 10 --target -200
  run "$B" bench learn --config configs/dqn-cartpole.yaml --config configs/dqn-cartpole-pal.yaml --steps 100000 --seeds 1,2
  run "$B" bench learn --config configs/dqn-cartpole.yaml --config configs/dqn-cartpole-pal.yaml --steps 100000 --seeds 1,2 --load 2
}
sec_remote() { # Remote envs and the replay service, on loopback
  run "$B" bench remote env
  (cd python && PYTHONPATH=.:tests exec "${PYTHON:-python3}" -m herd_env.serve --env pycartpole:CartPole --port 17420) &
  local py=$!
  sleep 2
  run "$B" bench remote env --addr 127.0.0.1:17420 --id CartPole --local-id CartPole-v1 || true
  kill "$py" 2>/dev/null || true
  wait "$py" 2>/dev/null || true
  (cd python && PYTHONPATH=.:tests run "${PYTHON:-python3}" -m herd_env.bench --env pycartpole:CartPole --steps 200000)
  run "$B" bench remote replay --mode hybrid
}
sec_dist() { # Distributed runs: learning and wire bytes
  for s in 1 2 3; do
    for a in ppo dqn; do
      run "$B" launch --config "configs/$a-cartpole-dist.yaml" --seed $s --out "$TMP/dist-$a-$s" --quiet
    done
  done
  for s in 1 2 3; do
    for a in ppo dqn; do
      run "$B" launch --config "configs/$a-cartpole-dist.yaml" --steps 50000 --seed $s --out "$TMP/wire-$a-$s" --quiet
    done
  done
}
sec_minatar() { # MinAtar: herd's step vs MinAtar's, both on core 0, two rounds
  go test -c -o "$TMP/minatar.test" ./env/minatar
  for r in 1 2; do
    if [ -n "${MINATAR_DIR:-}" ]; then
      run taskset -c 0 /usr/bin/python3 env/minatar/testdata/gen/bench_minatar.py --minatar "$MINATAR_DIR" --steps 30000
    else
      echo "MINATAR_DIR unset: MinAtar's side skipped"
    fi
    run taskset -c 0 "$TMP/minatar.test" -test.run '^$' -test.bench Step -test.benchtime 1000000x -test.cpu 1
  done
}
sec_layout() { # Code layout: cmd/herd lines, layering test, duplicate pairs
  run bash scripts/layout.sh
}
sec_resume() { # Resume: the checkpoint container, and a PPO CartPole checkpoint's cost and size
  run go test -run XXX -bench . -benchtime 20x -count 3 ./internal/trainstate
  run go test -run XXX -bench BenchmarkCheckpoint -benchtime 5x -count 3 ./algo/ppo
}

for w in "${WANT[@]}"; do
  echo "== $w → $OUT/$w.txt"
  { header "$w"; "sec_$w"; } 2>&1 | tee "$OUT/$w.txt"
done
