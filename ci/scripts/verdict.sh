#!/bin/sh
# verdict.sh: fail the check when allot validate found errors (status left by
# plan.sh), or when the committed CODEOWNERS is not what allot renders.
set -eu
. "$(dirname -- "$0")/lib.sh"
[ -r "$ALLOT_OUT/status" ] || die "$ALLOT_OUT/status is missing: plan.sh did not run"
status=$(cat "$ALLOT_OUT/status")
if [ "$status" -ne 0 ]; then
	say "the capacity configuration has errors: see the annotations and the plan comment"
fi
if [ "$status" -eq 0 ] && [ -r "$ALLOT_OUT/codeowners-stale" ]; then
	say "$(cat "$ALLOT_OUT/codeowners-stale") is out of date: see the plan step's log"
	exit 1
fi
exit "$status"
