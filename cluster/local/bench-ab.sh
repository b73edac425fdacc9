#!/usr/bin/env bash
# make bench-ab: the fleet bench's A/B of the provider's flow-control flags. Each
# scenario runs once per setting, the settings one after the other for each scenario
# and from the same binaries, so that the rows of a scenario differ by the setting
# alone. Results land in bench/results/fleet-ab/<setting>/ (committed); hack/fleetreport -ab
# turns them into docs/fleet/ab.md, which docs/operations.md links from the flags
# they justify. A decision taken on them is a dated record in docs/decisions/ naming its
# results (a line "Results: bench/results/fleet-ab"), which the report links.
#
# AB_KINDS (default "copyrule configrollout"), AB_N (10000) and AB_LAYOUT (one) pick
# the scenarios; each takes 4 to 8 minutes on 2 cores, the default run about 40.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
source "$here/common.sh"
cd "$root"
out="$CACHE_DIR/bench/ab"
mkdir -p "$out"
"$here/build-tools.sh" controlplane
gcflags=-gcflags=all=-dwarf=false
CGO_ENABLED=0 go build "$gcflags" -o "$out/provider" ./cmd/provider
CGO_ENABLED=0 go test -tags bench -vet=off "$gcflags" -c -o "$out/bench.test" ./test/bench/
commit="$(measured_commit)"

# setting name, then the flags it runs the provider with.
settings=(
  "default|"
  "unbounded|--max-routine-requests=0"
  "no-quiet|--quiet-routine-requests=0"
)
for kind in ${AB_KINDS:-copyrule configrollout}; do
  for s in "${settings[@]}"; do
    name="${s%%|*}" args="${s#*|}"
    echo "bench-ab: $kind ${AB_N:-10000} ${AB_LAYOUT:-one} $name" >&2
    mkdir -p "$root/bench/results/fleet-ab/$name"
    echo "$args" >"$root/bench/results/fleet-ab/$name/flags"
    BENCH_PROVIDER="$out/provider" FLEET_BENCH_TEST="$out/bench.test" BENCH_COMMIT="$commit" \
      BENCH_PROVIDER_ARGS="$args" FLEET_RESULTS="$root/bench/results/fleet-ab/$name" \
      FLEET_KINDS="$kind" FLEET_SIZES="${AB_N:-10000}" FLEET_LAYOUTS="${AB_LAYOUT:-one}" \
      "$here/bench-fleet.sh"
  done
done
go run ./hack/fleetreport -ab bench/results/fleet-ab -md docs/fleet/ab.md
