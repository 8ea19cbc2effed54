#!/usr/bin/env bash
# Runs one phase of a long job and says where its time went:
#
#   hack/phase.sh NAME CMD [ARG...]
#
# Runs CMD with its output unchanged, then prints "phase NAME: W s wall, U s
# user, S s sys CPU (exit N)" to stderr and, when PHASE_LOG is set, appends the
# same figures to that file as "NAME W U S N" (what .ci/run sums up). CPU is
# that of CMD and every process it waited for. Exits with CMD's status.
set -uo pipefail
name=$1
shift
start=$EPOCHREALTIME
"$@"
rc=$?
end=$EPOCHREALTIME
# The second line of `times` is the CPU time of the children waited for: CMD.
# (`times` must run in this shell, not in a pipeline's subshell.)
tmp=$(mktemp)
times >"$tmp"
read -r user sys < <(tail -1 "$tmp" | awk '{
	for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); printf "%.1f ", p[1] * 60 + p[2] } }')
rm -f "$tmp"
wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
echo "phase $name: $wall s wall, $user s user, $sys s sys CPU (exit $rc)" >&2
[[ -n ${PHASE_LOG:-} ]] && echo "$name $wall $user $sys $rc" >>"$PHASE_LOG"
exit $rc
