#!/bin/sh
# verdict.sh: fail the check when allot validate found errors (status left by plan.sh).
set -eu
. "$(dirname -- "$0")/lib.sh"
[ -r "$ALLOT_OUT/status" ] || die "$ALLOT_OUT/status is missing: plan.sh did not run"
status=$(cat "$ALLOT_OUT/status")
if [ "$status" -ne 0 ]; then
	say "the capacity configuration has errors: see the annotations and the plan comment"
fi
exit "$status"
