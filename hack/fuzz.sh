#!/usr/bin/env bash
# Runs every fuzz target for a bounded time: `make fuzz` (longer) and
# `make fuzz-ci` (a few seconds each, part of `make test`) both read the list
# below, so a new target is added in one place.
#
# Usage: hack/fuzz.sh [fuzztime]   (default 2s per target)
#
# When a target fails, Go writes the failing input to
# <package>/testdata/fuzz/<Target>/: commit it (nothing in .gitignore covers
# testdata/fuzz) so that it runs as seed corpus in every plain `go test` too.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${1:-2s}"

# package                                   target
TARGETS="
./internal/reach/                           FuzzCheck
./internal/controller/configrollout/        FuzzHashDeterministic
./internal/controller/configrollout/        FuzzHashSeparates
./internal/controller/configrollout/        FuzzReferences
./internal/controller/configrollout/        FuzzNextWave
./internal/controller/configrollout/        FuzzWorkloadHash
./internal/controller/configrollout/        FuzzReadersIndex
./internal/controller/configrollout/        FuzzRuns
./internal/controller/configrollout/        FuzzRolloutLimit
./internal/controller/configrollout/        FuzzKeeps
./internal/controller/copyrule/             FuzzSelectTargets
./internal/controller/copyrule/             FuzzCopyContent
./internal/controller/copyrule/             FuzzMakePlan
./internal/controller/copyrule/             FuzzSummarizedPlan
./internal/controller/copyrule/             FuzzCopyTable
./internal/controller/copyrule/             FuzzSourceConflicts
./internal/controller/copyrule/             FuzzTransform
./internal/controller/copyrule/             FuzzInputsDigest
./internal/controller/copyrule/             FuzzFresh
./internal/controller/copyrule/             FuzzCopyAnyKind
./internal/window/                          FuzzWindow
./internal/shard/                           FuzzAssign
./internal/shard/                           FuzzOf
./internal/shard/                           FuzzDecide
./internal/shard/                           FuzzRangesSelector
./internal/ownwrite/                        FuzzOwnWrite
./internal/controller/chaosagent/           FuzzSelector
./internal/controller/chaosagent/           FuzzCompile
./internal/controller/chaosagent/           FuzzExcluded
./internal/controller/chaosagent/           FuzzGuard
./internal/controller/chaosagent/           FuzzVerdicts
./internal/controller/chaosagent/           FuzzStopReason
./internal/controller/appbundle/            FuzzDeploymentChanged
./internal/controller/appbundle/            FuzzClaimChanged
./internal/controller/immortalcontainer/    FuzzRestartDelay
./internal/controller/immortalcontainer/    FuzzPodChanged
./internal/flow/                            FuzzConvergedAndLight
./internal/function/                        FuzzDuration
./internal/function/                        FuzzNames
./internal/apimetrics/                      FuzzClassify
./internal/controller/managedkind/          FuzzJittered
./internal/drift/                           FuzzFields
"

# Each package's test binary is built once, its own packages instrumented for
# coverage guidance and its dependencies not: go test -fuzz instruments every
# dependency too, which on an empty build cache recompiles all of Kubernetes'
# client libraries once more, for guidance in code the targets do not test.
module=$(go list -m)
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
cache="$(go env GOCACHE)/fuzz"
failed=0
built=""
while read -r pkg target; do
	[[ -z "$pkg" ]] && continue
	bin="$bins/$(echo "$pkg" | tr -c 'a-z0-9\n' '_').test"
	if [[ " $built " != *" $pkg "* ]]; then
		if ! go test -c -o "$bin" -gcflags="$module/...=-d=libfuzzer" "$pkg"; then
			failed=1
			continue
		fi
		built+=" $pkg"
	fi
	[[ -x "$bin" ]] || continue
	echo "fuzz: $target ($pkg, $FUZZTIME)"
	importpath="$module/${pkg#./}"
	for attempt in 1 2; do
		# Run from the package's directory, as go test does: the seed corpus
		# and failing inputs are in its testdata/fuzz.
		if out=$(cd "$pkg" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
			-test.fuzzcachedir "$cache/${importpath%/}" 2>&1); then
			break
		fi
		# On a loaded machine the fuzzing engine can run out of its time while
		# still gathering baseline coverage and report "context deadline
		# exceeded" without having found anything: try once more. A real
		# failure writes its input to testdata/fuzz and is never retried.
		if [[ $attempt == 1 && "$out" == *"context deadline exceeded"* && "$out" != *"Failing input written to"* ]]; then
			echo "fuzz: $target ran out of time before fuzzing; retrying"
			continue
		fi
		echo "$out"
		failed=1
		break
	done
done <<<"$TARGETS"

# Every Fuzz function in the repository must be in the list above.
missing=$(comm -13 <(echo "$TARGETS" | awk 'NF == 2 { print $2 }' | sort) \
	<(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' internal cmd hack test 2>/dev/null | sed 's/^func //' | sort -u))
if [[ -n "$missing" ]]; then
	echo "fuzz: targets missing from hack/fuzz.sh: $missing"
	failed=1
fi
exit "$failed"
