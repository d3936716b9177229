#!/usr/bin/env bash
# Runs the commands of README.md and of every guide page (docs/guide/*.md)
# as a new user would: in a fresh clone of the committed tree, the pages in
# order in that one clone (default output directories must not collide),
# each page in one bash session, so that cd, export, variables and
# background jobs (`&`) carry from one command to the next as in a
# terminal. .ci/run runs it after the tests; nothing may fail.
#
#   scripts/doc-commands.sh [PAGE.md ...]   (default README.md docs/guide/*.md)
#   DOC_TIMEOUT=1200 DOC_PORT_WAIT=300      (limits per command and per port, seconds)
#
# Every line of a ```sh block is a command (a trailing \ continues it); a
# ```python block runs as one python3 program with python/ on PYTHONPATH.
# A command ending in `&` is a background job: for each port it names
# (--port N, --addr H:P, --metrics-addr H:P) the next command waits until
# the port accepts connections, polling every 0.5 s for up to DOC_PORT_WAIT
# seconds. A foreground command still running after DOC_TIMEOUT seconds is
# stopped (its process group: SIGTERM, SIGKILL 10 s later) and fails. At a
# page's end every background job still running is stopped the same way;
# one that had exited with a failure fails the page.
#
# A command a CI machine cannot run is skipped by a rule in skip_reason,
# with its reason printed; one that needs a local stand-in runs with the
# change in substitute, printed beside it. own-env.md's Go code (the env
# and its registry entry) is written into the clone first, as its reader
# does. Output: one line per command (exit status, wall seconds,
# page:line, command), the output's tail for a failure; exit status 1 if
# any command failed.
# One { } block: bash reads it whole before it runs, so a run is not
# changed by an edit of this file (or a checkout) while it runs.
{
set -uo pipefail
cd "$(dirname "$0")/.."
DOC_TIMEOUT=${DOC_TIMEOUT:-1200}
DOC_PORT_WAIT=${DOC_PORT_WAIT:-300}
export DOC_TIMEOUT DOC_PORT_WAIT
if [ $# -gt 0 ]; then pages=("$@"); else pages=(README.md docs/guide/*.md); fi
for p in "${pages[@]}"; do [ -f "$p" ] || { echo "no such page: $p" >&2; exit 2; }; done

T=$(mktemp -d /tmp/doc-commands.XXXXXX)
NATS_PID= SID=
# kill_session: every process left in the running page's session (its
# own setsid: $SID), whatever process group it is in.
kill_session() {
  local s st pid rest sig
  for sig in TERM KILL; do
    for s in /proc/[0-9]*/stat; do
      read -r st 2>/dev/null <"$s" || continue
      pid=${st%% *} rest=${st##*) }
      set -- $rest
      [ "${4:-}" = "$SID" ] && kill -"$sig" "$pid" 2>/dev/null
    done
    [ $sig = TERM ] && sleep 1
  done
}
cleanup() {
  [ -z "$SID" ] && [ -n "${D:-}" ] && SID=$(cat "$D/sid" 2>/dev/null)
  [ -n "$SID" ] && kill_session
  if [ -n "$NATS_PID" ]; then kill "$NATS_PID" 2>/dev/null; wait "$NATS_PID" 2>/dev/null; fi
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 143' INT TERM
git clone -q . "$T/herd"
mkdir -p "$T/bin"
echo "doc-commands: clone of $(git rev-parse --short HEAD) in $T/herd; $(uptime | sed 's/.*load/load/')"

# python/herd_env needs the distribution's grpc and protobuf; the python3
# first on PATH (a pyenv shim, say) may lack them where /usr/bin/python3
# has them.
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import grpc, google.protobuf' 2>/dev/null; then PY=$(command -v "$p"); break; fi
done
if [ -n "$PY" ] && [ "$PY" != "$(command -v python3)" ]; then
  ln -s "$PY" "$T/bin/python3"
  echo "substitution: python3 is $PY (it has grpc and protobuf; $(command -v python3) has not)"
fi
export PATH="$T/bin:$PATH"

have_docker() {
  docker info >/dev/null 2>&1 && { docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null; }
}

# skip_reason CMD: prints why CMD cannot run here and succeeds, or fails.
skip_reason() {
  local c=$1
  case $c in
    "go test -race -timeout 30m ./..."*) echo "the tests: .ci/run runs them before this script"; return 0 ;;
    apt-get\ install*) echo "installs system packages as root; .ci/run installs libopenblas-dev, python3-grpcio and python3-protobuf"; return 0 ;;
    *kubectl\ * | *kustomize\ *) echo "needs a Kubernetes cluster (go test ./cmd/herd -run TestDeploy checks the manifests)"; return 0 ;;
    *"docker push "*) echo "needs an image registry (REGISTRY/herd:TAG)"; return 0 ;;
    sbatch\ * | *scancel\ * | squeue\ *) echo "needs a Slurm cluster (.ci/run runs scripts/slurm-test.sh, which submits deploy/slurm/herd.sbatch to a single-host Slurm)"; return 0 ;;
    scripts/slurm-test.sh*) echo ".ci/run runs it before this script"; return 0 ;;
  esac
  if [[ $c == *./cmd/herd* && $c == *"["* ]]; then echo "a synopsis line, not a command"; return 0; fi
  if [[ $c == *"-tags openblas"* ]] && ! dpkg -s libopenblas-dev >/dev/null 2>&1; then
    echo "needs libopenblas-dev"; return 0
  fi
  if [[ $c == tensorboard* ]] && ! command -v tensorboard >/dev/null; then
    echo "TensorBoard is not installed (not part of herd; go test ./metrics/tfevents reads the event files)"; return 0
  fi
  if [[ $c == *python3* ]] && [ -z "$PY" ]; then echo "needs python3 with python3-grpcio and python3-protobuf"; return 0; fi
  if [[ $c == *gymnasium* ]] && ! "$PY" -c 'import gymnasium' 2>/dev/null; then
    echo "needs Gymnasium, which herd does not (the page: where Gymnasium is installed)"; return 0
  fi
  if [[ $c == *docker* || $c == *'$c '* || $c == deploy/compose/build.sh* ]] && ! have_docker; then
    echo "needs Docker Engine with compose"; return 0
  fi
  return 1
}

# start_nats: a NATS server with JetStream on 127.0.0.1, built from the
# nats-server module herd pins in go.mod (as deploy/compose/build.sh does;
# with herd's own cgo setting, so that herd's build of the embedded server
# package is reused).
start_nats() {
  [ -n "$NATS_PID" ] && return 0
  local t0=$SECONDS p
  (cd "$T/herd" && go build -o "$T/bin/nats-server" github.com/nats-io/nats-server/v2) || return 1
  for p in $(seq 14222 14322); do (: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || break; done
  "$T/bin/nats-server" -js -a 127.0.0.1 -p "$p" -sd "$T/jetstream" >"$T/nats.log" 2>&1 &
  NATS_PID=$!
  local end=$((SECONDS + 60))
  until (: <>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do
    if ! kill -0 "$NATS_PID" 2>/dev/null || [ $SECONDS -ge $end ]; then cat "$T/nats.log"; return 1; fi
    sleep 0.5
  done
  export HERD_DOC_NATS="nats://127.0.0.1:$p"
  echo "local nats-server -js at $HERD_DOC_NATS: built and started in $((SECONDS - t0)) s"
}

# substitute CMD: sets SUB (the command to run) and SUB_WHY (empty if CMD
# runs as written).
substitute() {
  SUB=$1 SUB_WHY=
  if [[ $SUB == *"nats://a:4222,nats://b:4222"* ]]; then
    start_nats || { echo "could not start a local nats-server" >&2; exit 1; }
    SUB=${SUB//"nats://a:4222,nats://b:4222"/'$HERD_DOC_NATS'}
    SUB_WHY="the example hosts a and b are one local nats-server -js ($HERD_DOC_NATS, built from go.mod)"
    if [[ $SUB == *--no-workers* || $SUB == *"worker --role env"* || $SUB == *"worker --role policy"* ]]; then
      SUB+=" &"
      SUB_WHY+="; a process the page runs on another machine is a background job"
    fi
  fi
  if [[ $SUB == *"docker compose "* ]] && ! docker compose version >/dev/null 2>&1 && command -v docker-compose >/dev/null; then
    SUB=${SUB//"docker compose "/"docker-compose "}
    SUB_WHY="docker-compose, the page's alternative: the compose plugin is not installed"
  fi
  if [[ $SUB == tensorboard* ]]; then
    SUB+=" --port 6006 &"
    SUB_WHY="a server: a background job, stopped at the page's end"
  fi
}

# ports CMD: the ports a background command serves.
ports() {
  local s=$1
  while [[ $s =~ --(port|addr|metrics-addr)[=[:space:]]+([^[:space:]]*:)?([0-9]+) ]]; do
    echo "${BASH_REMATCH[3]}"
    s=${s#*"${BASH_REMATCH[0]}"}
  done
}

# parse PAGE: the page's commands in C_LINE/C_TEXT, its Go blocks in GO_BLOCKS.
parse() {
  C_LINE=() C_TEXT=() GO_BLOCKS=()
  local ln=0 blk= line acc= accln=0 buf= bufln=0
  while IFS= read -r line || [ -n "$line" ]; do
    ln=$((ln + 1))
    if [ -z "$blk" ]; then
      case $line in
        '```sh'*) blk=sh ;;
        '```python'*) blk=python buf= bufln=$((ln + 1)) ;;
        '```go'*) blk=go buf= ;;
        '```'*) blk=other ;;
      esac
      continue
    fi
    if [[ $line == '```'* ]]; then
      case $blk in
        python) C_LINE+=("$bufln") C_TEXT+=("PYTHONPATH=python python3 - <<'PYTHON'"$'\n'"${buf}PYTHON") ;;
        go) GO_BLOCKS+=("$buf") ;;
      esac
      blk=
      continue
    fi
    case $blk in
      sh)
        [ -z "$acc" ] && accln=$ln
        if [[ $line == *\\ ]]; then acc+="$line"$'\n'; continue; fi
        acc+=$line
        [[ $acc =~ ^[[:space:]]*(#.*)?$ ]] || { C_LINE+=("$accln") C_TEXT+=("$acc"); }
        acc=
        ;;
      python | go) buf+="$line"$'\n' ;;
    esac
  done <"$1"
}

# The functions of a page's session: __pre and __post wrap each command,
# __end stops the background jobs.
cat >"$T/session.sh" <<'EOF'
echo $$ >"$D/sid"
set -m
exec 3>&1 4>&2
__bg=() __bgn=() __fail=0 __page_t0=$SECONDS
__open() { (: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
__say() { printf '%s\n' "$*" >&3; }
__tail() { tail -n "${2:-15}" "$D/out.$1" | sed 's/^/    /' >&3; }
__fgpids() { # PID: the session's children that are neither background jobs nor PID
  local me=$1 s st pid rest
  for s in /proc/[0-9]*/stat; do
    read -r st 2>/dev/null <"$s" || continue
    pid=${st%% *} rest=${st##*) }
    set -- $rest
    [ "$2" = "$$" ] && [ "$pid" != "$me" ] && [[ " ${__bg[*]} " != *" $pid "* ]] && echo "$pid"
  done
}
__stop() { # process groups: SIGTERM, then SIGKILL after 10 s
  local p end=$((SECONDS + 10))
  for p; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
  for p; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.5; done
    kill -KILL -- "-$p" 2>/dev/null
  done
}
__watch() { local me=$BASHPID; sleep "$DOC_TIMEOUT"; : >"$D/timeout.$1"; __stop $(__fgpids "$me"); }
__skip() { __say "skip        $(<"$D/label.$1")"; __say "    skipped: $(<"$D/why.$1")"; }
__pre() { # N PORT...: fails if a port the command serves is taken
  local n=$1 p; shift
  for p; do
    if __open "$p"; then
      __say "rc=1      0s  $(<"$D/label.$n")"; __say "    port $p is in use before the command starts"; __fail=1; return 1
    fi
  done
  exec >"$D/out.$n" 2>&1
  __t0=$SECONDS
  __watch "$n" & __wd=$!
}
__post() { # N RC PID BG PORT...
  local n=$1 rc=$2 pid=$3 bg=$4 p end; shift 4
  kill -TERM -- "-$__wd" 2>/dev/null; wait "$__wd" 2>/dev/null
  [ -e "$D/timeout.$n" ] && rc=124 && echo "stopped after DOC_TIMEOUT=${DOC_TIMEOUT}s"
  # `docker wait` prints the container's exit status: the run's, for the page.
  if [ "$rc" = 0 ] && [[ $(<"$D/as.$n") == "docker wait "* ]] && [ "$(tail -n 1 "$D/out.$n")" != 0 ]; then
    rc=1; echo "the container's exit status is not 0"
  fi
  if [ "$bg" = 1 ]; then
    for p; do
      end=$((SECONDS + DOC_PORT_WAIT))
      until __open "$p"; do
        if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; rc=$?; echo "the job ended (rc=$rc) before port $p accepted connections"; rc=1; break 2; fi
        if [ $SECONDS -ge $end ]; then rc=1; echo "port $p not accepting connections after ${DOC_PORT_WAIT}s"; break 2; fi
        sleep 0.5
      done
    done
  fi
  # A background job is stopped at the page's end unless it already ended.
  [ "$bg" = 1 ] && kill -0 "$pid" 2>/dev/null && __bg+=("$pid") __bgn+=("$n")
  exec >&3 2>&4
  if [ "$bg" = 1 ]; then
    printf 'rc=%-3d %4ds  %s  [background%s]\n' "$rc" $((SECONDS - __t0)) "$(<"$D/label.$n")" "${*:+, port $*}" >&3
  else
    printf 'rc=%-3d %4ds  %s\n' "$rc" $((SECONDS - __t0)) "$(<"$D/label.$n")" >&3
  fi
  [ -s "$D/why.$n" ] && __say "    ran as: $(<"$D/as.$n")" && __say "    because: $(<"$D/why.$n")"
  [ "$rc" -ne 0 ] && __fail=1 && __tail "$n"
  return 0
}
__end() {
  local i p rc alive=()
  exec 2>/dev/null # no job notices
  for i in "${!__bg[@]}"; do
    p=${__bg[$i]}
    if kill -0 "$p" 2>/dev/null; then alive+=("$p"); continue; fi
    wait "$p"; rc=$?
    if [ "$rc" -ne 0 ]; then
      __fail=1; __say "rc=$rc of the background job $(<"$D/label.${__bgn[$i]}")"; __tail "${__bgn[$i]}"
    fi
  done
  [ ${#alive[@]} -gt 0 ] && __stop "${alive[@]}" && wait "${alive[@]}" 2>/dev/null
  # A compose project the page brought up goes down with it.
  [[ ${c:-} == *compose* ]] && $c down -v >/dev/null 2>&1
  __say "   page: $((SECONDS - __page_t0)) s; ${#alive[@]} background job(s) still running stopped"
  exit "$__fail"
}
EOF

fail=0
t0=$SECONDS
for page in "${pages[@]}"; do
  parse "$page"
  D=$T/pages/$(basename "$page" .md)-$RANDOM
  mkdir -p "$D"
  S=$D/page.sh
  printf 'D=%q\ncd %q\n. %q\n' "$D" "$T/herd" "$T/session.sh" >"$S"
  echo "== $page"
  if [ "$(basename "$page")" = own-env.md ]; then
    # The reader writes steps 1 and 2 into herd's tree before step 3.
    n=0
    printf '%s' "${GO_BLOCKS[0]:-}" >"$D/go.1"
    printf '%s' "${GO_BLOCKS[1]:-}" >"$D/go.2"
    echo "$page: steps 1 and 2: env/corridor/corridor.go and the registry entry, from the page's Go blocks" >"$D/label.0"
    : >"$D/why.0"
    cat >>"$S" <<'EOF'
__pre 0 && {
# A registry this step cannot edit is put back, so that one failed step
# fails this page only, not every page after it.
cp env/registry.go "$D/registry.orig" &&
grep -q '^package corridor' "$D/go.1" && grep -q '"Corridor-v0"' "$D/go.2" &&
mkdir -p env/corridor && cp "$D/go.1" env/corridor/corridor.go &&
awk -v f="$D/go.2" '{ print } /^\t"herd\/env\/classic"$/ { print "\t\"herd/env/corridor\"" }
  /^\treturn (append\()?\[\]Spec\{$/ { while ((getline l < f) > 0) { print "\t\t" l; n++ } }
  END { exit n == 0 }' env/registry.go >"$D/registry.go" &&
mv "$D/registry.go" env/registry.go && grep -q herd/env/corridor env/registry.go && go vet ./env/...
rc=$?
if [ $rc -ne 0 ]; then cp "$D/registry.orig" env/registry.go; rm -rf env/corridor; fi
__post 0 $rc "" 0
}
EOF
  fi
  for i in "${!C_TEXT[@]}"; do
    n=$((i + 1))
    text=${C_TEXT[$i]}
    one=$(printf '%s' "$text" | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta')
    [[ $text == PYTHONPATH=python* ]] && one="(python block) $(printf '%s' "$text" | sed -n 2p) …"
    echo "$page:${C_LINE[$i]}  $one" >"$D/label.$n"
    if why=$(skip_reason "$one"); then
      echo "$why" >"$D/why.$n"
      echo "__skip $n" >>"$S"
      continue
    fi
    substitute "$text"
    printf '%s' "$SUB_WHY" >"$D/why.$n"
    printf '%s' "$SUB" | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' >"$D/as.$n"
    bg=0 pp=()
    if [[ $SUB =~ [^\&]\&[[:space:]]*(#.*)?$ ]]; then bg=1; mapfile -t pp < <(ports "$SUB"); fi
    printf '__pre %d %s && {\n%s\n__post %d $? "$!" %d %s\n}\n' "$n" "${pp[*]:-}" "$SUB" "$n" "$bg" "${pp[*]:-}" >>"$S"
  done
  echo "__end" >>"$S"
  # In a session of its own, so that nothing it started outlives it.
  setsid -w bash "$S" </dev/null &
  wait $! || fail=1
  SID=$(cat "$D/sid" 2>/dev/null)
  kill_session
  SID= D=
done
echo "doc-commands: $((SECONDS - t0)) s for ${#pages[@]} page(s), $([ $fail = 0 ] && echo "all commands exit 0" || echo "FAILED"); $(uptime | sed 's/.*load/load/')"
exit $fail
}
