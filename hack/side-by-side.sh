#!/usr/bin/env bash
# Runs make targets side by side and fails if any of them fails:
#
#   hack/side-by-side.sh [-phase PREFIX] [-nice TARGET]... TARGET...
#
# Each target's output goes to a log of its own, printed whole, each line
# prefixed with "[TARGET] ", as soon as that target ends (so suites' lines
# never interleave). With -phase, each target runs as the phase PREFIX-TARGET
# of hack/phase.sh (what .ci/run sums up). A target named by -nice runs at a
# lower CPU priority: the others (whose tests wait for real pods, timers and
# watches) keep their pace, it takes the CPU they leave.
#
# When FAIL_LOG is set, each failed target's failing lines (go test's
# "--- FAIL", the message lines under it, panics, "FAIL" package lines) are
# appended to that file too, prefixed like the rest: .ci/run prints them last,
# where a log cut to its tail still shows them.
#
# Targets must not build what another builds: build their common
# prerequisites first (make test does).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

prefix= niced=()
while [[ $# -gt 0 && $1 == -* ]]; do
	case $1 in
	-phase) prefix=$2 ;;
	-nice) niced+=("$2") ;;
	*)
		echo "side-by-side: unknown flag $1" >&2
		exit 2
		;;
	esac
	shift 2
done
if [[ $# == 0 ]]; then
	echo "usage: hack/side-by-side.sh [-phase PREFIX] [-nice TARGET]... TARGET..." >&2
	exit 2
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A target_of
for target in "$@"; do
	cmd=(make --no-print-directory "$target")
	[[ -n $prefix ]] && cmd=(hack/phase.sh "$prefix-$target" "${cmd[@]}")
	[[ " ${niced[*]} " == *" $target "* ]] && cmd=(nice -n 10 "${cmd[@]}")
	"${cmd[@]}" >"$logs/$target.log" 2>&1 &
	target_of[$!]=$target
done
echo "side-by-side: running $* (each one's output follows when it ends)"

failed=()
while [[ ${#target_of[@]} -gt 0 ]]; do
	wait -n -p pid
	rc=$?
	target=${target_of[$pid]}
	unset "target_of[$pid]"
	sed "s/^/[$target] /" "$logs/$target.log"
	if [[ $rc != 0 ]]; then
		failed+=("$target")
		echo "side-by-side: $target failed (exit $rc)"
		[[ -n ${FAIL_LOG:-} ]] && awk -v p="[$target] " '
			# A message that ends in a colon goes on in the lines indented
			# under it (a list of writes, testify'"'"'s Error and Messages):
			# the first 6 of them come along.
			more > 0 && match($0, /^[[:space:]]*/) && RLENGTH > indent { print p $0; more--; next }
			{ more = 0 }
			/--- FAIL|^FAIL|^panic:|Error [0-9]+$/ { print p $0; next }
			/^[[:space:]]+[^[:space:]]+\.go:[0-9]+:/ { print p $0; if ($0 ~ /:[[:space:]]*$/) { match($0, /^[[:space:]]*/); indent = RLENGTH; more = 6 } }
		' "$logs/$target.log" >>"$FAIL_LOG"
	fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "side-by-side: failed: ${failed[*]}" >&2
	exit 1
fi
