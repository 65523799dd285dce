#!/bin/sh
# label.sh: label the pull or merge request $ALLOT_LABEL (default finance-approval)
# while the plan's approvals include the finance role, and take the label off when
# a later push no longer needs finance.
set -eu
. "$(dirname -- "$0")/lib.sh"
review_target || exit 0
label=${ALLOT_LABEL:-finance-approval}

want=false
if jq -e '[.diff.approvals[]? | select(.role == "finance")] | length > 0' "$ALLOT_OUT/plan.json" >/dev/null; then
	want=true
fi

body=$(mktemp)
resp=$(mktemp)
trap 'rm -f "$body" "$resp"' EXIT

# The labels the change has now: GitHub lists them as objects, GitLab as names.
case $(forge) in
github) api GET "$ISSUE/labels?per_page=100" >"$resp" ;;
gitlab) api GET "$ISSUE" >"$resp" ;;
esac
has=$(jq --arg l "$label" 'any((if type == "array" then .[].name else .labels[] end)?; . == $l)' "$resp")

# relabel add|remove
relabel() {
	case $(forge)/$1 in
	github/add)
		jq -n --arg l "$label" '{labels: [$l]}' >"$body"
		api POST "$ISSUE/labels" "$body" >/dev/null
		;;
	github/remove) api DELETE "$ISSUE/labels/$(jq -rn --arg l "$label" '$l | @uri')" >/dev/null ;;
	gitlab/*)
		jq -n --arg l "$label" --arg op "$1_labels" '{($op): $l}' >"$body"
		api PUT "$ISSUE" "$body" >/dev/null
		;;
	esac
}

if [ "$want" = true ]; then
	[ "$has" = true ] || relabel add
	say "finance must approve: labelled $label"
else
	[ "$has" = false ] || relabel remove
	say "finance need not approve: no $label label"
fi
