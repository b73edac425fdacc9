# shellcheck shell=bash
# The demo's waits, in their own file so that demo_test.go can source them without running the
# demo. Every wait has a bound, so `make demo` cannot hang, and stops at once if the watched
# process (the provider) exits. Sourced, not executed; needs bash 5 (EPOCHREALTIME) and a kc
# function (kubectl on the demo's cluster) from the sourcing script.

watch_name="" watch_pid="" watch_log=""
ready_timeout=60 # seconds; the test shortens it

# watch_process <name> <pid> <log>: from now on every wait fails at once if <pid> exits, printing
# the tail of <log>. watch_process with no arguments stops watching.
watch_process() { watch_name=${1:-} watch_pid=${2:-} watch_log=${3:-}; }

# wait_for <seconds> <what did not happen> <command...>: runs <command> every 50ms until it
# succeeds. Returns 1 after <seconds>, saying "<what did not happen> within <seconds>s", and 2 as
# soon as the watched process has exited.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((${EPOCHREALTIME/[.,]/} + secs * 1000000))
  while :; do
    if [[ -n "$watch_pid" ]] && ! kill -0 "$watch_pid" 2>/dev/null; then
      echo "demo: the $watch_name (pid $watch_pid) exited, so $what; last 20 lines of $watch_log:" >&2
      tail -n 20 "$watch_log" >&2 || true
      return 2
    fi
    "$@" && return 0
    if ((${EPOCHREALTIME/[.,]/} >= deadline)); then
      echo "demo: $what within ${secs}s" >&2
      return 1
    fi
    sleep 0.05
  done
}

# kubectl waits for ever by default; a poll must not outlive its wait's bound.
kc_poll() { kc --request-timeout=5s "$@"; }

# output_is <expected> <kubectl args...>: the command prints exactly <expected>.
output_is() { [[ "$(kc_poll "${@:2}" 2>/dev/null)" == "$1" ]]; }

# exists <namespace> <kind> <name>
exists() { kc_poll -n "$1" get "$2" "$3" >/dev/null 2>&1; }

# gone <namespace> <kind> <name>: the object is not found (an error from the API is not "gone").
gone() {
  local out
  out="$(kc_poll -n "$1" get "$2" "$3" --ignore-not-found -o name 2>/dev/null)" && [[ -z "$out" ]]
}

# ready_or_fail <kind> <name> [<namespace>, default demo]: waits up to $ready_timeout seconds for
# managed resource <kind>/<name> to be Ready; shows it as YAML if it is not.
ready_or_fail() {
  local ns=${3:-demo} rc=0
  wait_for "$ready_timeout" "$1/$2 in namespace $ns was not Ready" \
    output_is True -n "$ns" get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' || rc=$?
  if ((rc == 0)); then
    echo "$1/$2 is Ready"
    return 0
  fi
  # After the provider's exit its log says more than the resource does.
  if ((rc == 1)); then kc_poll -n "$ns" get "$1" "$2" -o yaml >&2 || true; fi
  return "$rc"
}
