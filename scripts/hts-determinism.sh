#!/usr/bin/env bash
# Determinism at benchmark length (docs/BENCHMARKS.md, "HTS"): PPO CartPole
# under HTS, 100k steps, seed 1, for several env-worker and policy-worker
# counts, GOMAXPROCS 1 and 2, with and without variable step times. Every
# line must print the same hash. Run from the repository root.
set -euo pipefail
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
H=${HERD:-$D/herd}
[ -n "${HERD:-}" ] || go build -o "$H" ./cmd/herd
for combo in "1 1 2 -" "2 1 2 -" "4 1 2 -" "4 2 2 -" "4 4 2 -" "4 8 2 -" "2 8 1 -" "1 2 1 -" "4 2 2 st" "2 4 1 st"; do
  set -- $combo; E=$1; P=$2; G=$3; ST=$4
  cfg=$D/c-$E-$P-$G-$ST.yaml
  sed "s/^  env_workers: 4/  env_workers: $E/; s/^  policy_workers: 1/  policy_workers: $P/" configs/ppo-cartpole-hts.yaml > $cfg
  if [ "$ST" = st ]; then sed -i 's/^  policy_workers: .*/&\n  step_time: {mean: 20us, cv: 2, tail_prob: 0.01, tail_factor: 10}/' $cfg; fi
  GOMAXPROCS=$G $H train --config $cfg --steps 100000 --quiet --force --out $D/r-$E-$P-$G-$ST >/dev/null
  echo "E=$E P=$P GOMAXPROCS=$G step_time=$ST $(python3 - $D/r-$E-$P-$G-$ST/model.safetensors <<'PY'
import sys,json,struct,hashlib
b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]
print(hashlib.sha256(b[8+n:]).hexdigest()[:16], "(sha256 of the tensor bytes)")
PY
)"
done
