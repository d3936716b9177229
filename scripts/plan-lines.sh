#!/usr/bin/env bash
# Lines of each dataflow plan (docs/BENCHMARKS.md "Dataflow plans"): every line
# of the plan function from `func` to its closing brace, comments inside
# included (RLlib Flow's Table 1 counts the same way), and with its doc comment
# too; beside them RLlib Flow's minimal / +shared counts and herd's goal. Then
# the lines of Go (tests excluded) under run/ and flow/.
#
#   scripts/plan-lines.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# count FILE FUNC: "<body lines> <doc lines>" of the function whose line starts
# with FUNC (a func declaration up to its name).
count() {
  awk -v fn="$2" '
    /^\/\// { doc++; next }
    index($0, fn) == 1 { infn = 1; n = 0 }
    infn { n++; if ($0 == "}") { print n, doc; exit } ; next }
    { doc = 0 }
  ' "$1"
}

echo "| plan | file | lines (func … }) | with doc comment | RLlib Flow (minimal / +shared) | herd goal |"
echo "|---|---|---:|---:|---|---|"
while read -r name file fn rllib goal; do
  [ -f "$file" ] || continue
  name=${name//_/ }; fn=${fn//_/ }; rllib=${rllib//_/ }
  read -r body doc < <(count "$file" "$fn") || true
  [ -n "${body:-}" ] || continue
  echo "| $name | $file | $body | $((body + doc)) | $rllib | ≤ $goal |"
done <<'PLANS'
A2C_and_PPO flow/plans.go func_SyncPlan( 25_/_50_and_79_/_225 25
A3C algo/a3c/a3c.go func_(c_*Config)_Plan( 9_/_52 15
DQN,_SAC,_TD3,_DDPG flow/plans.go func_ReplayPlan( 87_/_139_(DQN) 60
Ape-X flow/plans.go func_ApeXPlan( 126_/_216 90
IMPALA algo/impala/impala.go func_(c_*Config)_Plan( 89_/_362 80
Twin-trainer examples/twinplan/main.go func_(c_*twin)_Plan( —_(Listing_4) 20
PLANS
echo
goloc() { find "$@" -name '*.go' ! -name '*_test.go' -print0 | xargs -0 cat | wc -l; }
echo "| Go lines (tests excluded) | lines |"
echo "|---|---:|"
for d in run/hts run/pal run/distexec run flow; do
  [ -d "$d" ] && echo "| $d | $(goloc "$d") |"
done
