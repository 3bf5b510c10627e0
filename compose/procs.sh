# Sourced by compose/run.sh and compose/observe.sh: the processes a script
# starts in the background (start NAME CMD...) and stops together (stop, on
# INT or TERM too). The caller defines say.
pids=()
names=()
status=0
stopped=0
signalled=0
stop() {
  trap - INT TERM
  [ "$stopped" = 1 ] && return
  stopped=1
  say "stopping ${names[*]}"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
}
trap 'signalled=1; stop' INT TERM

start() { # name, then the command
  local name=$1
  shift
  say "starting $name"
  "$@" &
  pids+=($!)
  names+=("$name")
}
