#!/usr/bin/env bash
# docs/BENCHMARKS.md "The env-step loops": non-test Go lines per package at
# FROM and TO (plan-lines.sh's rule: every line of every *.go file but
# *_test.go under the folder), and the change between them by topic: each
# non-merge commit's added minus removed lines of such files (git diff
# --numstat against its parent), summed under the topic scripts/lines-topics.txt
# gives it. What merges changed beyond their branches' commits (conflict
# resolutions) is the column "merges".
#
#   scripts/lines-by-topic.sh [FROM [TO]]     (default bc051cd b4faaa5; a commit
#                                              outside the topics file is an error)
set -euo pipefail
cd "$(dirname "$0")/.."
from=${1:-bc051cd} to=${2:-b4faaa5}
pkgs="run worker flow algo algo/internal rollout"
loc() { git ls-tree -r --name-only "$1" -- "$2/" | { grep '\.go$' || true; } | { grep -v '_test\.go$' || true; } |
  while read -r f; do git show "$1:$f"; done | wc -l; }
delta() { git diff --numstat --no-renames "$1^" "$1" -- 'run/*.go' 'worker/*.go' 'flow/*.go' 'algo/*.go' 'rollout/*.go' |
  awk '$3 !~ /_test\.go$/ { d = $1 - $2; split($3, p, "/"); t[p[1]] += d; if ($3 ~ /^algo\/internal\//) t["algo/internal"] += d }
       END { printf "run %d worker %d flow %d algo %d algo/internal %d rollout %d\n", t["run"], t["worker"], t["flow"], t["algo"], t["algo/internal"], t["rollout"] }'; }
declare -A sum start end
mapfile -t topics < <(awk '!/^#/ && !seen[$2]++ { print $2 }' scripts/lines-topics.txt)
for c in $(git rev-list --no-merges --reverse "$from..$to"); do
  read -r _ r _ w _ f _ a _ ai _ ro < <(delta "$c")
  [ "$r$w$f$a$ai$ro" = 000000 ] && continue
  t=$(awk -v c="${c:0:7}" '$1 == c { print $2 }' scripts/lines-topics.txt)
  [ -n "$t" ] || { echo "no topic for $(git log -1 --format='%h %s' "$c")" >&2; exit 1; }
  set -- $r $w $f $a $ai $ro
  for p in $pkgs; do sum[$t,$p]=$(( ${sum[$t,$p]:-0} + $1 )); shift; done
done
printf '| package | %s | %s | merges | %s |\n' "$from" "$(IFS='|'; echo "${topics[*]}" | sed 's/|/ | /g')" "$to"
printf '|---|---:|%s---:|---:|\n' "$(printf -- '---:|%.0s' "${topics[@]}")"
for p in $pkgs; do
  start[$p]=$(loc "$from" "$p"); end[$p]=$(loc "$to" "$p")
  row="| $p | ${start[$p]} |"; acc=${start[$p]}
  for t in "${topics[@]}"; do v=${sum[$t,$p]:-0}; acc=$((acc + v)); row+=" $(printf '%+d' "$v") |"; done
  row+=" $(printf '%+d' $(( ${end[$p]} - acc ))) | ${end[$p]} |"
  echo "$row"
done
# The total: every package but algo/internal, which algo's row holds.
row="| run, worker, flow, algo, rollout | $(( ${start[run]} + ${start[worker]} + ${start[flow]} + ${start[algo]} + ${start[rollout]} )) |"; acc=0
for t in "${topics[@]}"; do v=0; for p in run worker flow algo rollout; do v=$((v + ${sum[$t,$p]:-0})); done; acc=$((acc + v)); row+=" $(printf '%+d' "$v") |"; done
e=$(( ${end[run]} + ${end[worker]} + ${end[flow]} + ${end[algo]} + ${end[rollout]} ))
row+=" $(printf '%+d' $(( e - acc - ${start[run]} - ${start[worker]} - ${start[flow]} - ${start[algo]} - ${start[rollout]} ))) | $e |"
echo "$row"
